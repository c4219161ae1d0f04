"""IndexFile / IndexService against the golden stores of the real RocketMQ 4.9.8 and 5.3.3, plus units.

Fixtures (the truth): ``store{A,B,B2,C}/index`` with the dumps' ``index_file`` lines (raw 40-byte headers)
and ``query`` lines (``queryMessage(topic, key, 64, 0, Long.MAX)`` and the raw ``IndexService.queryOffset``
walk, plus the ``[t0,t0]``, ``[t0-999,t0+999]``, ``[t0+1,MAX]`` windows and ``no-such-key``).

* reading: every ``index_file`` line and every ``query`` line is reproduced by a read-only IndexService;
* writing: replaying the dumps' ``msg`` lines gives byte-identical index files (A, C), and B/B2's abnormal
  recovery (delete files newer than the checkpoint, re-dispatch) gives the files the real recovery left;
* units: upstream IndexFileTest vectors, MIN_VALUE hash, the rolled file's first-entry timeDiff quirk,
  corrupt chains, hypothesis against a brute-force model, native/pure parity and fuzzing.
"""
from __future__ import annotations

import os
import random
import shutil
import struct
import threading
import time
from array import array
from functools import cache
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqcore import _impl, indexfile_format
from rmqcore.errors import ConfigError, IndexCorruptError, RmqError, StoreClosedError
from rmqcore.indexfile import IndexFile, IndexHeader, IndexService, index_file_name
from tests.conftest import IMPLS, RMQ_FIXTURES, VERSIONS, read_jsonl_gz

STORES = ("A", "B", "B2", "C")
SLOTS, ENTRIES = 100, 1000  # the goldens' maxHashSlotNum / maxIndexNum
LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1
HDR = struct.Struct(">qqqqii")
ENTRY = struct.Struct(">iqii")


def _k(impl: SimpleNamespace | str) -> ModuleType:
    return _impl.kernel("indexfile", impl if isinstance(impl, str) else impl.name)


def _h(impl: SimpleNamespace | str) -> ModuleType:
    return _impl.kernel("hashing", impl if isinstance(impl, str) else impl.name)


# --------------------------------------------------------------------------------------------------
# golden data
# --------------------------------------------------------------------------------------------------


@cache
def _dump(version: str, store: str) -> dict[str, Any]:
    lines = read_jsonl_gz(RMQ_FIXTURES / version / f"store{store}.dump.jsonl.gz")
    msgs = sorted(
        (
            (m["topic"], m.get("uniqKey"), m.get("dispatch_keys"), m["phyOffset"], m["storeTimestamp"],
             m["sysFlag"])
            for m in lines
            if m["type"] == "msg"
        ),
        key=lambda m: m[3],
    )  # fmt: skip
    return {
        "index_file": [d for d in lines if d["type"] == "index_file"],
        "query": [d for d in lines if d["type"] == "query"],
        "msg": msgs,
        "pre_open": next(d for d in lines if d["type"] == "pre_open"),
    }


def _index_root(version: str, store: str) -> Path:
    """The store whose index/ holds the files the dump describes.

    The dumps are taken *after* the real code opened (and, for B/B2, recovered) a copy of the store. A and C
    exit cleanly, so their dumps describe ``storeA``/``storeC``'s own files. B and B2 crashed: the real
    recovery deleted the last index file (endTimestamp > checkpoint indexMsgTimestamp) and rebuilt it under
    a new name, so their dumps describe ``storeB_after_java_recovery``/``storeB2_after_java_recovery``.
    """
    names = [d["name"] for d in _dump(version, store)["index_file"]]
    candidates = [f"store{store}", f"store{store}_after_java_recovery"]
    for c in candidates:
        d = RMQ_FIXTURES / version / c / "index"
        if d.is_dir() and sorted(os.listdir(d)) == names:
            assert c == (f"store{store}_after_java_recovery" if store in ("B", "B2") else f"store{store}")
            return d.parent
    raise AssertionError(f"no index dir of {version} store{store} holds {names}")


def _file_bytes(index_dir: Path) -> list[bytes]:
    return [(index_dir / n).read_bytes() for n in sorted(os.listdir(index_dir))]


# --------------------------------------------------------------------------------------------------
# (1) headers, (2) queries
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("version", VERSIONS)
def test_index_file_headers(version: str, store: str, impl: SimpleNamespace) -> None:
    root = _index_root(version, store)
    with IndexService(root, SLOTS, ENTRIES, read_only=True, impl=impl.name) as svc:
        fields = ("beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount",
                  "indexCount")  # fmt: skip
        got = [
            {"type": "index_file", "name": f.name, "len": os.path.getsize(f.path),
             **dict(zip(fields, _k(impl).index_header(f.buffer), strict=True))}
            for f in svc.index_files
        ]  # fmt: skip
        assert got == _dump(version, store)["index_file"]
        assert [h.to_bytes() for h in svc.files] == [b[:40] for b in _file_bytes(root / "index")]


@pytest.mark.parametrize("store", STORES)
@pytest.mark.parametrize("version", VERSIONS)
def test_queries(version: str, store: str, impl: SimpleNamespace) -> None:
    queries = _dump(version, store)["query"]
    hashing = _h(impl)
    bad: list[str] = []
    windows = {"all": 0, "t0": 0, "pm999": 0, "after": 0, "no-such-key": 0}
    with IndexService(_index_root(version, store), SLOTS, ENTRIES, read_only=True, impl=impl.name) as svc:
        for q in queries:
            topic, key, begin, end = q["topic"], q["key"], q["begin"], q["end"]
            raw, last_ts, last_phy = svc.query_offset(topic, key, 64, begin, end)
            ok = raw == q["queryOffset_raw_phyOffsets"]
            # queryMessage: the raw list sorted; its re-query attempts (end := the first hit's store time)
            # only run when no record could be read, which never happens here: equal in every line
            ok = ok and sorted(raw) == q["queryMessage_phyOffsets"]
            if "indexKeyHash" in q:
                ok = ok and hashing.index_key_hash(f"{topic}#{key}") == q["indexKeyHash"]
                # queryMessage copies the last-update values only from a non-empty result
                ok = ok and ((last_ts, last_phy) if raw else (0, 0)) == (
                    q["indexLastUpdateTimestamp"], q["indexLastUpdatePhyoffset"])
            if not ok:
                bad.append(f"{topic}#{key} [{begin},{end}]: got {raw}")
            if key == "no-such-key":
                windows["no-such-key"] += 1
            elif begin == 0 and end == LONG_MAX:
                windows["all"] += 1
            elif begin == end:
                windows["t0"] += 1
            elif end == LONG_MAX:
                windows["after"] += 1
            elif end - begin == 1998:
                windows["pm999"] += 1
    assert not bad, f"{len(bad)} of {len(queries)} queries differ, e.g. {bad[:3]}"
    assert all(windows.values()), windows


# --------------------------------------------------------------------------------------------------
# (3) replay: byte-identical files
# --------------------------------------------------------------------------------------------------


def _replay(svc: IndexService, msgs: list[tuple[Any, ...]], batch: bool, seed: int = 0) -> None:
    if not batch:
        for m in msgs:
            svc.build_index(*m)
        return
    rng = random.Random(seed)
    i = 0
    while i < len(msgs):
        chunk = msgs[i : i + rng.choice((1, 2, 7, 50, 333))]
        cols = list(zip(*chunk, strict=True))
        svc.build_index_batch(
            cols[0], cols[1], cols[2], np.array(cols[3], dtype=np.int64), array("q", cols[4]), list(cols[5])
        )
        i += len(chunk)


@pytest.mark.parametrize("mode", ["single", "batch"])
@pytest.mark.parametrize("store", ["A", "C"])
@pytest.mark.parametrize("version", VERSIONS)
def test_replay_byte_identical(
    version: str, store: str, mode: str, impl: SimpleNamespace, tmp_path: Path
) -> None:
    with IndexService(tmp_path, SLOTS, ENTRIES, impl=impl.name) as svc:
        _replay(svc, _dump(version, store)["msg"], mode == "batch")
        names = [f.name for f in svc.index_files]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert all(len(n) == 17 and n.isdigit() for n in names)
    # names are creation times and differ: files are paired by order
    got = _file_bytes(tmp_path / "index")
    golden = RMQ_FIXTURES / version / f"store{store}" / "index"
    want = _file_bytes(golden)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"index file #{i} differs from {sorted(os.listdir(golden))[i]}"


@pytest.mark.parametrize("store", ["B", "B2"])
@pytest.mark.parametrize("version", VERSIONS)
def test_abnormal_recovery_rebuilds_like_java(
    version: str, store: str, impl: SimpleNamespace, tmp_path: Path
) -> None:
    """§6.2: on an unclean exit, files with endTimestamp > checkpoint.indexMsgTimestamp are deleted, and
    the re-dispatch rebuilds them. Re-dispatching *every* record gives the same bytes as the real recovery
    (which started at commitlog file 786432): records below the last kept file's endPhyOffset are skipped."""
    d = _dump(version, store)
    shutil.copytree(RMQ_FIXTURES / version / f"store{store}" / "index", tmp_path / "index")
    for p in (tmp_path / "index").iterdir():
        os.chmod(p, 0o644)
    with IndexService(tmp_path, SLOTS, ENTRIES, impl=impl.name) as svc:
        deleted = svc.delete_newer_than(d["pre_open"]["checkpoint_raw_indexMsgTimestamp"])
        assert len(deleted) == 1 and len(svc) == 2
        _replay(svc, d["msg"], batch=impl.name == "native")
    want = _file_bytes(RMQ_FIXTURES / version / f"store{store}_after_java_recovery" / "index")
    assert _file_bytes(tmp_path / "index") == want


# --------------------------------------------------------------------------------------------------
# (4) units: upstream vectors and RocketMQ's rules
# --------------------------------------------------------------------------------------------------


def test_indexfiletest_vectors(impl: SimpleNamespace, tmp_path: Path) -> None:
    """store/src/test/.../index/IndexFileTest: slots 100, entries 400."""
    f = IndexFile.create(tmp_path / "f", 100, 400, impl=impl.name)
    try:
        for i in range(399):
            assert f.put_key(str(i), i, 1_700_000_000_000 + i)
        assert not f.put_key("399", 399, 1_700_000_000_399)  # indexCount starts at 1: 399 entries
        assert f.header.index_count == 400 and f.header.entries == 399
        assert f.select("60", 0, LONG_MAX, 10) == [60]
    finally:
        f.destroy()


def test_chunked_allocation_writes_the_same_file(
    impl: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries are allocated a chunk at a time (indexfile_format.ALLOC_ENTRIES): one put at a time and in
    batches, across chunk ends, the file is byte for byte the one written with no chunking, and a
    file reopened mid-chunk goes on from its count."""
    rnd = random.Random(7)
    hashes = [rnd.randrange(2**31) for _ in range(300)]
    offs, tss = list(range(1000, 1300)), [1_700_000_000_000 + 10 * i for i in range(300)]

    def write(path: Path, chunk: int) -> bytes:
        monkeypatch.setattr(indexfile_format, "ALLOC_ENTRIES", chunk)
        f = IndexFile.create(path, 31, 400, impl=impl.name)
        for i in range(100):
            assert f.put_hash(hashes[i], offs[i], tss[i])
        f.close()
        f = IndexFile.open(path, 31, 400, impl=impl.name)  # reopened with 101 entries in
        a = lambda xs: np.array(xs, dtype=np.int64)  # noqa: E731
        assert f.put_hashes(a(hashes), a(offs), a(tss), 100, 300) == 200
        assert [f.put_hash(7, 2000, tss[-1]) for _ in range(100)].count(True) == 99  # 399 entries hold
        assert f.is_full()
        f.close()
        return path.read_bytes()

    assert write(tmp_path / "chunked", 16) == write(tmp_path / "whole", 10**6)


def test_empty_service_query_with_int_max(impl: SimpleNamespace, tmp_path: Path) -> None:
    """IndexServiceTest: queryOffset with maxNum = Integer.MAX_VALUE on an empty service does not throw."""
    with IndexService(tmp_path, 10, 10, impl=impl.name) as svc:
        assert svc.query_offset("T", "k", INT_MAX, 0, LONG_MAX) == ([], 0, 0)


def test_min_value_hash_goes_to_slot_zero(impl: SimpleNamespace, tmp_path: Path) -> None:
    assert _h(impl).java_string_hash("TopicA#mh-Pdg4a9z") == -(1 << 31)
    with IndexService(tmp_path, 100, 10, impl=impl.name) as svc:
        assert svc.build_index("TopicA", None, "mh-Pdg4a9z", 500, 1_700_000_000_000) == 1
        buf = svc.index_files[0].buffer
        assert struct.unpack_from(">i", buf, 40)[0] == 1  # slot 0 -> entry 1
        assert ENTRY.unpack_from(buf, 40 + 400 + 20) == (0, 500, 0, 0)
        assert svc.query_offset("TopicA", "mh-Pdg4a9z")[0] == [500]


def test_header_lifecycle_and_first_entry_quirk(impl: SimpleNamespace, tmp_path: Path) -> None:
    """A new first file has an all-zero header; a rolled file is preset with the previous end values
    and counts 0; its first entry's timeDiff is relative to the previous file's end."""
    with IndexService(tmp_path, 10, 3, impl=impl.name) as svc:  # 2 entries per file
        svc._last_writable()
        assert svc.files[0] == IndexHeader(0, 0, 0, 0, 0, 0)
        svc.build_index("T", None, "a", 100, 1_000_000)
        svc.build_index("T", None, "b", 200, 1_000_500)
        assert svc.files == [IndexHeader(1_000_000, 1_000_500, 100, 200, 2, 3)]
        svc.build_index("T", None, "x", 300, 1_004_900)  # opens with a roll (first file is full)
        first, second = svc.index_files
        assert second.header == IndexHeader(1_004_900, 1_004_900, 300, 300, 1, 2)
        e = ENTRY.unpack_from(second.buffer, 40 + 40 + 20)
        assert e[1:3] == (300, 4)  # (1_004_900 - 1_000_500) // 1000, not 0
        # hence the entry's time is begin + 4 s: a window at its real store time misses it
        assert svc.query_offset("T", "x", 64, 1_004_900, 1_004_900)[0] == []
        assert svc.query_offset("T", "x", 64, 1_004_900, 1_008_899)[0] == []
        assert svc.query_offset("T", "x", 64, 1_004_900, 1_008_900)[0] == [300]
        # a roll that happens before a record that adds nothing still creates the (preset) file
        svc.build_index("T", None, "y", 400, 1_005_000)  # second file full now
        svc.build_index("T", None, None, 500, 1_006_000)
        assert len(svc) == 3
        assert svc.files[2] == IndexHeader(1_005_000, 1_005_000, 400, 400, 0, 0)


def test_build_index_rules(impl: SimpleNamespace, tmp_path: Path) -> None:
    with IndexService(tmp_path, 7, 100, impl=impl.name) as svc:
        assert svc.build_index("T", "U1", "  lead  trail ", 10, 1_000) == 3  # uniq, lead, trail
        assert svc.build_index("T", "U1", "k", 5, 1_000) == 0  # re-dispatch below endPhyOffset
        assert svc.build_index("T", None, "again", 10, 1_000) == 1  # == endPhyOffset is not skipped
        assert svc.build_index("T", "R", "rb", 20, 2_000, 0xC) == 0  # ROLLBACK
        assert svc.build_index("T", "P", None, 30, 3_000, 0x4) == 1  # PREPARED is indexed
        assert svc.build_index("T", "C", "", 40, 4_000, 0x8) == 1  # COMMIT is indexed
        assert svc.build_index("T", "", None, 50, 5_000) == 1  # an empty UNIQ_KEY value is still a key
        assert svc.query_offset("T", "lead")[0] == [10]
        assert svc.query_offset("T", "U1")[0] == [10]
        assert svc.query_offset("T", "rb")[0] == []
        assert svc.query_offset("T", "P")[0] == [30]
        assert svc.query_offset("T", "")[0] == [50]
        assert svc.query_offset("Other", "lead")[0] == []
        raw, ts, phy = svc.query_offset("T", "nothing")
        assert (raw, ts, phy) == ([], 5_000, 50)


def test_query_caps_at_max_msgs_num_batch(impl: SimpleNamespace, tmp_path: Path) -> None:
    with IndexService(tmp_path, 16, 60, impl=impl.name) as svc:
        for i in range(150):
            svc.build_index("T", None, "same", 1000 + i, 1_000_000 + 10 * i)
        assert len(svc) == 3
        raw, _, _ = svc.query_offset("T", "same", 1000)
        assert raw == list(range(1149, 1149 - 64, -1))  # newest file first, newest entry first
        assert svc.query_offset("T", "same", 5)[0] == [1149, 1148, 1147, 1146, 1145]
        assert svc.query_offset("T", "same", 0)[0] == []


def test_delete_expired_and_newer_than(impl: SimpleNamespace, tmp_path: Path) -> None:
    with IndexService(tmp_path, 4, 3, impl=impl.name) as svc:
        for i in range(8):  # 2 entries per file: 4 files, ends (phy) 101, 103, 105, 107
            svc.build_index("T", None, f"k{i}", 100 + i, 10_000 * (i + 1))
        names = [f.name for f in svc.index_files]
        assert [h.end_phy_offset for h in svc.files] == [101, 103, 105, 107]
        assert svc.delete_expired(101) == []  # endPhyOffset < min only
        assert svc.delete_expired(104) == names[:2]
        assert svc.delete_expired(10**9) == [names[2]]  # never the last file
        assert [f.name for f in svc.index_files] == names[3:]
        assert not (tmp_path / "index" / names[0]).exists()
        assert svc.delete_newer_than(80_000) == []
        assert svc.delete_newer_than(79_999) == [names[3]]
        assert len(svc) == 0
        svc.build_index("T", None, "k", 200, 90_000)  # a fresh first file, named after the last one
        assert svc.index_files[0].name > names[3]


def test_queries_during_building_and_deletion(impl: SimpleNamespace, tmp_path: Path) -> None:
    """Queries take no lock: run them from threads while files roll and the oldest are deleted."""
    errors: list[BaseException] = []
    stop = threading.Event()
    with IndexService(tmp_path, 8, 20, impl=impl.name) as svc:

        def reader() -> None:
            try:
                while not stop.is_set():
                    raw, _, _ = svc.query_offset("T", "hot", 64, 0, LONG_MAX)
                    assert raw == sorted(raw, reverse=True) and len(raw) <= 64
                    time.sleep(0)  # let the writer have the GIL (pure kernels hold it)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        for i in range(3000):
            svc.build_index("T", None, "hot" if i % 3 else f"k{i}", 100 + i, 1_000_000 + i)
            if i % 50 == 49:
                svc.delete_expired(100 + i - 100)
        stop.set()
        for t in threads:
            t.join()
        assert len(svc) <= 8
        assert svc.query_offset("T", "hot")[0][0] == 100 + 2999
    assert not errors, errors


def test_query_skips_a_file_closed_under_it(impl: SimpleNamespace, tmp_path: Path) -> None:
    """The two states a concurrently deleted file can be in when a query that took the list before the
    deletion reaches it: map closed (IndexFile.close between mm.close() and forgetting the map), or
    file closed. Either way the query skips it."""
    with IndexService(tmp_path, 4, 3, impl=impl.name) as svc:
        for i in range(6):
            svc.build_index("T", None, "k", 100 + i, 10_000 * (i + 1))
        oldest, middle, _ = svc.index_files
        assert svc.query_offset("T", "k")[0] == [105, 104, 103, 102, 101, 100]
        oldest.buffer.close()
        assert svc.query_offset("T", "k")[0] == [105, 104, 103, 102]
        middle.close()
        assert svc.query_offset("T", "k")[0] == [105, 104]
        svc._files = svc._files[2:]  # what delete_expired leaves (the closed files are gone)


def test_names_unique_and_increasing(impl: SimpleNamespace, tmp_path: Path) -> None:
    frozen = 1_700_000_000_999
    with IndexService(tmp_path, 2, 2, impl=impl.name, name_clock=lambda: frozen) as svc:
        for i in range(5):
            svc.build_index("T", None, "k", i, 1_000 + i)
        names = [f.name for f in svc.index_files]
    assert names[0] == index_file_name(frozen)
    assert names == sorted(names) and len(set(names)) == 5
    assert all(len(n) == 17 and n.isdigit() for n in names)
    (tmp_path / "index" / "README.txt").write_text("stray")  # not an index file name: ignored
    with IndexService(tmp_path, 2, 2, read_only=True, impl=impl.name) as svc:
        assert [f.name for f in svc.index_files] == names
        with pytest.raises(ConfigError):
            svc.build_index("T", None, "k", 10, 2_000)
        with pytest.raises(ConfigError):
            svc.delete_expired(100)
    with pytest.raises(StoreClosedError):
        svc.query_offset("T", "k")


def test_bad_files_on_load(impl: SimpleNamespace, tmp_path: Path) -> None:
    d = tmp_path / "index"
    d.mkdir()
    (d / "20240101000000000").write_bytes(bytes(40 + 8 + 40))  # 2 slots, 2 entries
    (d / "20240101000000001").write_bytes(bytes(41))
    with pytest.raises(ConfigError, match="length 41"):
        IndexService(tmp_path, 2, 2, read_only=True, impl=impl.name)
    (d / "20240101000000001").write_bytes(HDR.pack(0, 0, 0, 0, 0, 3) + bytes(48))
    with pytest.raises(IndexCorruptError) as ei:
        IndexService(tmp_path, 2, 2, read_only=True, impl=impl.name)
    assert ei.value.position == 36 and ei.value.path.endswith("20240101000000001")
    with pytest.raises(ConfigError):
        IndexService(tmp_path, 0, 2, impl=impl.name)


# --------------------------------------------------------------------------------------------------
# kernels: guards, errors, corrupt chains
# --------------------------------------------------------------------------------------------------


def _buf(slots: int, entries: int, count: int, begin_ts: int, chain: dict[int, tuple[int, int, int, int]],
         slot_values: dict[int, int]) -> bytearray:  # fmt: skip
    b = bytearray(40 + 4 * slots + 20 * entries)
    HDR.pack_into(b, 0, begin_ts, begin_ts, 0, 0, len(slot_values), count)
    for s, v in slot_values.items():
        struct.pack_into(">i", b, 40 + 4 * s, v)
    for i, e in chain.items():
        ENTRY.pack_into(b, 40 + 4 * slots + 20 * i, *e)
    return b


def test_chain_guards(impl: SimpleNamespace) -> None:
    k = _k(impl)
    T = 1_000_000
    sel = lambda b, **kw: k.index_select(  # noqa: E731
        b, 1, 8, kw.get("h", 7), kw.get("begin", 0), LONG_MAX, kw.get("max_num", 1000), kw.get("steps", 50))
    # self-loop: prevIndex == current stops after one entry
    assert sel(_buf(1, 8, 5, T, {3: (7, 30, 0, 3)}, {0: 3})) == [30]
    # prevIndex > indexCount stops; prevIndex <= 0 stops
    assert sel(_buf(1, 8, 5, T, {4: (7, 40, 0, 6), 3: (7, 30, 0, 0)}, {0: 4})) == [40]
    # a cycle of two: RocketMQ would loop until maxNum; max_steps bounds the entries read
    cyc = _buf(1, 8, 5, T, {2: (7, 20, 0, 3), 3: (7, 30, 0, 2)}, {0: 3})
    assert sel(cyc, steps=7) == [30, 20, 30, 20, 30, 20, 30]
    assert sel(cyc, steps=200, max_num=5) == [30, 20, 30, 20, 30]
    assert sel(_buf(1, 8, 5, T, {2: (9, 20, 0, 3), 3: (9, 30, 0, 2)}, {0: 3}), steps=10**4) == []
    assert len(sel(cyc, steps=300)) == 300  # longer than one native chunk
    # slot value > indexCount, or indexCount <= 1: nothing
    assert sel(_buf(1, 8, 2, T, {3: (7, 30, 0, 0)}, {0: 3})) == []
    assert sel(_buf(1, 8, 1, T, {1: (7, 10, 0, 0)}, {0: 1})) == []
    # indexCount <= 0 reads as 1
    assert sel(_buf(1, 8, -5, T, {1: (7, 10, 0, 0)}, {0: 1})) == []
    # a negative timeDiff stops; the time guard stops after the first entry older than begin
    assert sel(_buf(1, 8, 5, T, {4: (7, 40, -1, 3), 3: (7, 30, 0, 0)}, {0: 4})) == []
    b = _buf(1, 8, 5, T, {4: (7, 40, 9, 3), 3: (7, 30, 2, 2), 2: (7, 20, 5, 0)}, {0: 4})
    assert sel(b, begin=T + 3000) == [40]
    assert sel(b, begin=T) == [40, 30, 20]
    # a full file whose slot points at entry N (past the buffer in RocketMQ): stop, never read it
    full = _buf(1, 4, 4, T, {3: (7, 30, 0, 4)}, {0: 4})
    assert k.index_select(full, 1, 4, 7, 0, LONG_MAX, 9, 9) == []
    full2 = _buf(1, 4, 4, T, {3: (7, 30, 0, 4)}, {0: 3})
    assert k.index_select(full2, 1, 4, 7, 0, LONG_MAX, 9, 9) == [30]
    # only the hash is compared; time arithmetic wraps like Java's long
    wrap = _buf(1, 8, 5, LONG_MAX - 500, {4: (7, 40, 1, 0)}, {0: 4})
    assert k.index_select(wrap, 1, 8, 7, -(1 << 63), LONG_MAX, 9, 9) == [40]
    assert k.index_select(wrap, 1, 8, 7, 0, LONG_MAX, 9, 9) == []


def test_put_guards(impl: SimpleNamespace) -> None:
    k = _k(impl)
    b = bytearray(k.index_file_size(2, 4))
    struct.pack_into(">i", b, 40, 9)  # a slot value beyond indexCount counts as empty
    assert k.index_put(b, 2, 4, 0, 11, 5_000)
    assert k.index_header(b) == (5_000, 5_000, 11, 11, 1, 2)
    assert ENTRY.unpack_from(b, 40 + 8 + 20) == (0, 11, 0, 0)
    assert k.index_put(b, 2, 4, 2, 12, 2_000)  # same slot; store time before begin: timeDiff 0
    assert ENTRY.unpack_from(b, 40 + 8 + 40) == (2, 12, 0, 1)
    assert k.index_put(b, 2, 4, 4, 13, 5_000 + (INT_MAX + 5) * 1000)  # capped at Integer.MAX_VALUE
    assert ENTRY.unpack_from(b, 40 + 8 + 60)[2] == INT_MAX
    assert not k.index_put(b, 2, 4, 1, 14, 6_000)
    assert k.index_header(b)[4:] == (1, 4)
    # begin timestamp <= 0: timeDiff 0; negative diff truncates toward zero (then 0)
    c = bytearray(k.index_file_size(1, 3))
    HDR.pack_into(c, 0, -5, 0, 0, 0, 0, 1)
    assert k.index_put(c, 1, 3, 3, 1, 999_999)
    assert ENTRY.unpack_from(c, 40 + 4 + 20)[2] == 0


def test_errors_are_identical(impl: SimpleNamespace) -> None:
    k = _k(impl)
    b = bytearray(k.index_file_size(2, 4))
    with pytest.raises(ConfigError):
        k.index_file_size(0, 4)
    with pytest.raises(ConfigError):
        k.index_put(b, 2, 1 << 31, 0, 0, 0)
    with pytest.raises(ValueError, match="key_hash"):
        k.index_put(b, 2, 4, -1, 0, 0)
    with pytest.raises(ValueError, match="key_hash"):
        k.index_select(b, 2, 4, 1 << 31, 0, 0, 1, 1)
    with pytest.raises(ValueError, match="max_steps"):
        k.index_select(b, 2, 4, 0, 0, 0, 1, -1)
    with pytest.raises(OverflowError):
        k.index_select(b, 2, 4, 0, 0, 1 << 63, 1, 1)
    with pytest.raises(TypeError):
        k.index_put(bytes(b), 2, 4, 0, 0, 0)  # read-only
    with pytest.raises(TypeError):
        k.index_select(12, 2, 4, 0, 0, 0, 1, 1)
    with pytest.raises(IndexCorruptError) as ei:
        k.index_select(b[:-1], 2, 4, 0, 0, 0, 1, 1)
    assert ei.value.position == len(b) - 1
    with pytest.raises(IndexCorruptError):
        k.index_header(b[:39])
    struct.pack_into(">i", b, 36, 5)
    with pytest.raises(IndexCorruptError) as ei:
        k.index_put(b, 2, 4, 0, 0, 0)
    assert ei.value.position == 36
    struct.pack_into(">i", b, 36, 0)
    z = np.zeros(3, dtype=np.int64)
    with pytest.raises(TypeError):
        k.index_put_batch(b, 2, 4, np.zeros(3, dtype=np.int32), z, z, 0, 3)
    with pytest.raises(ValueError):
        k.index_put_batch(b, 2, 4, z, z, z[:2], 0, 3)
    with pytest.raises(ValueError, match="key_hash"):
        k.index_put_batch(b, 2, 4, [0, -1, 0], z, z, 0, 3)
    assert k.index_header(b)[5] == 0  # nothing was written


def test_put_batch_equals_single_puts(impl: SimpleNamespace) -> None:
    k = _k(impl)
    rng = random.Random(5)
    n = 60
    hashes = [rng.randrange(INT_MAX) for _ in range(n)]
    phys = list(range(1000, 1000 + n))
    tss = [1_700_000_000_000 + 700 * i for i in range(n)]
    one = bytearray(k.index_file_size(7, 40))
    put = [k.index_put(one, 7, 40, h, p, t) for h, p, t in zip(hashes, phys, tss, strict=True)]
    assert put.count(True) == 39
    many = bytearray(len(one))
    assert k.index_put_batch(many, 7, 40, array("q", hashes), np.array(phys), tss, 0, 10) == 10
    assert k.index_put_batch(many, 7, 40, hashes, phys, tss, 10, 10) == 0
    assert k.index_put_batch(many, 7, 40, hashes, phys, tss, 10, n) == 29
    assert one == many


# --------------------------------------------------------------------------------------------------
# hypothesis: model, parity, fuzz
# --------------------------------------------------------------------------------------------------


class Model:
    """Brute force over a plain list of entries: a slot's chain is every entry of that slot, newest first."""

    def __init__(self, slots: int, entries: int, preset_ts: int = 0, preset_phy: int = 0) -> None:
        self.s, self.n = slots, entries
        self.hdr = [preset_ts, preset_ts, preset_phy, preset_phy, 0, 1]  # a rolled file's preset header
        self.entries: list[tuple[int, int, int]] = []  # (hash, phy, timeDiff), entry i+1

    def put(self, h: int, phy: int, ts: int) -> bool:
        if len(self.entries) + 1 >= self.n:
            return False
        bt = self.hdr[0]
        d = ts - bt
        td = 0 if bt <= 0 or d < 0 else min(d // 1000, INT_MAX)
        new_slot = all(e[0] % self.s != h % self.s for e in self.entries)
        self.entries.append((h, phy, td))
        if len(self.entries) == 1:
            self.hdr[2], self.hdr[0] = phy, ts
        self.hdr[4] += new_slot
        self.hdr[5] += 1
        self.hdr[3], self.hdr[1] = phy, ts
        return True

    def select(self, h: int, begin: int, end: int, max_num: int) -> list[int]:
        out: list[int] = []
        for eh, phy, td in [e for e in self.entries if e[0] % self.s == h % self.s][::-1]:
            if len(out) >= max_num:
                break
            t = self.hdr[0] + td * 1000
            if eh == h and begin <= t <= end:
                out.append(phy)
            if t < begin:
                break
        return out


@given(
    slots=st.integers(1, 6),
    entries=st.integers(2, 30),
    preset=st.sampled_from([0, -1, 1_700_000_000_000 - 2_500, 1_700_000_000_000 + 9_999]),
    ops=st.lists(
        st.tuples(st.integers(0, 12), st.integers(0, 1 << 40), st.integers(-3_000, 20_000)), max_size=40
    ),
    queries=st.lists(st.tuples(st.integers(0, 12), st.integers(-5_000, 40_000), st.integers(0, 40_000),
                               st.integers(0, 8)), max_size=12),
)  # fmt: skip
def test_model(slots: int, entries: int, preset: int, ops: list[Any], queries: list[Any]) -> None:
    """Random puts then selects, every implementation, against the brute-force model; buffers identical
    across implementations and selects crossed (written by one, read by the other). ``preset``: the header
    of a rolled file (begin = end = the previous file's end), so the first entry's timeDiff quirk is
    exercised."""
    T0 = 1_700_000_000_000
    model = Model(slots, entries, preset, 77 if preset else 0)
    init = bytearray(_k(IMPLS[0]).index_file_size(slots, entries))
    HDR.pack_into(init, 0, *model.hdr[:4], 0, 0)
    bufs = {name: bytearray(init) for name in IMPLS}
    ts = T0
    for h, phy, dt in ops:
        ts += dt
        want = model.put(h, phy, ts)
        for name, b in bufs.items():
            assert _k(name).index_put(b, slots, entries, h, phy, ts) == want
    assert len({bytes(b) for b in bufs.values()}) == 1
    buf = next(iter(bufs.values()))
    assert list(_k(IMPLS[0]).index_header(buf)) == model.hdr[:5] + [model.hdr[5] if model.entries else 0]
    for h, b0, span, max_num in queries:
        begin, end = T0 + b0, T0 + b0 + span
        want = model.select(h, begin, end, max_num)
        for name in IMPLS:
            assert _k(name).index_select(buf, slots, entries, h, begin, end, max_num, entries) == want


def _fuzz_run(k: ModuleType, raw: bytearray, slots: int, entries: int, hashes: list[int]) -> tuple[Any, ...]:
    put_buf = bytearray(raw)
    batch_buf = bytearray(raw)
    n = len(hashes)
    return (
        _outcome(lambda: k.index_header(raw)),
        [_outcome(lambda h=h: k.index_select(raw, slots, entries, h, 0, LONG_MAX, 50, 64)) for h in hashes],
        [_outcome(lambda h=h: k.index_select(bytes(raw), slots, entries, h, 1 << 40, LONG_MAX, 3, 5))
         for h in hashes],
        [_outcome(lambda h=h: k.index_put(put_buf, slots, entries, h, 1, 2)) for h in hashes],
        bytes(put_buf),
        _outcome(lambda: k.index_put_batch(batch_buf, slots, entries, hashes, hashes, hashes, 0, n)),
        bytes(batch_buf),
    )


def _outcome(fn: Any) -> Any:
    try:
        return ("ok", fn())
    except RmqError as e:
        return ("err", type(e), e.position)


@given(
    data=st.binary(min_size=0, max_size=700),
    slots=st.integers(1, 8),
    entries=st.integers(1, 24),
    count=st.one_of(st.none(), st.integers(-3, 24)),
    hashes=st.lists(st.integers(0, 40), min_size=1, max_size=4),
)
def test_fuzz_random_bytes(
    data: bytes, slots: int, entries: int, count: int | None, hashes: list[int]
) -> None:
    """Random bytes as an index file never crash: results agree across implementations, and the only
    errors are rmqcore's (IndexCorruptError for a short buffer or an impossible header)."""
    raw = bytearray(data)
    if count is not None and len(raw) >= 40:
        struct.pack_into(">i", raw, 36, count)  # often a plausible header, so the walks really run
    results = {name: _fuzz_run(_k(name), raw, slots, entries, hashes) for name in IMPLS}
    assert len({repr(r) for r in results.values()}) == 1, results


def test_fuzz_corrupt_fixture_file(impl: SimpleNamespace, tmp_path: Path) -> None:
    """A golden file with random slot/entry bytes flipped: queries terminate and never fail outside
    rmqcore.errors, even with chains pointing anywhere."""
    src = RMQ_FIXTURES / VERSIONS[0] / "storeA" / "index"
    data = bytearray((src / sorted(os.listdir(src))[0]).read_bytes())
    rng = random.Random(11)
    for _ in range(400):
        pos = rng.randrange(40, len(data))
        data[pos] = rng.randrange(256)
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "20240101000000000").write_bytes(data)
    keys = [f"k{i}" for i in range(300)]
    with IndexService(tmp_path, SLOTS, ENTRIES, read_only=True, impl=impl.name) as svc:
        for key in keys:
            raw, _, _ = svc.query_offset("TopicA", key, 64, 0, LONG_MAX)
            assert len(raw) <= 64


def test_an_empty_newest_index_file_left_by_a_crash_is_dropped(tmp_path: Path) -> None:
    """A kill between creating the newest index file and sizing it leaves 0 bytes: it holds nothing,
    so opening the store deletes it (read-only: ignores it) and dispatch rebuilds the index."""
    from rmqcore.store import MessageStore

    geom = dict(commitlog_file_size=4096, cq_file_size=200, index_slots=17, index_entries=40)
    with MessageStore(tmp_path, **geom) as s:
        for i in range(10):
            s.put("T", b"x%d" % i, 0, keys="k%d" % i)
    names = sorted(p.name for p in (tmp_path / "index").iterdir())
    empty = tmp_path / "index" / (str(int(names[-1]) + 1))
    empty.write_bytes(b"")
    (tmp_path / "abort").write_bytes(b"")  # as after a kill
    with MessageStore(tmp_path, read_only=True, **geom) as ro:
        assert [m.body for m in ro.query_by_key("T", "k3")] == [b"x3"]
    assert empty.exists()  # read-only changes nothing
    with MessageStore(tmp_path, **geom) as s:
        assert not empty.exists()
        assert [m.body for m in s.query_by_key("T", "k3")] == [b"x3"]
