"""The nine recovery defects of issue 22, each reproduced as it was found (both twins).

1. keys lost when the store clock stepped back across index rolls before a crash (#8007, clock case);
2. keys put after a recovery cut not found (index files reaching past the cut);
3. records cut by recovery served again after a later clean open (cut bytes not zeroed);
4. one corrupt consume-queue unit making its queue undeliverable;
5. a record with a bad topic byte locking the store (and ``recover`` misreporting it);
6. a bit flip cutting every later record without a word (now: warning, report, quarantine);
7. ``verify`` missing a consume-queue unit that points at a torn record;
8. ``recover`` ignoring the store's flavour;
9. consume-queue file mtimes (RocketMQ 4.9.8 picks the file by mtime in getOffsetInQueueByTime).
"""
from __future__ import annotations

import json
import struct
import warnings
from pathlib import Path

import pytest

from rmqcore import layout as L
from rmqcore.commitlog import CommitLog
from rmqcore.errors import RecoveryCutWarning
from rmqcore.message import MessageExt
from rmqcore.store import GetStatus, MessageStore
from rmqcore.verify import verify_store
from tests.conftest import copy_store
from tests.test_cli import IDX, run_cli

T0 = 1_700_000_000_000


def _crash(store: Path) -> None:
    """What a kill leaves beside the files: the abort file (abnormal recovery at the next open)."""
    (store / "abort").write_bytes(b"")


def _patch(store: Path, offset: int, file_size: int, data: bytes) -> Path:
    """Overwrite CommitLog bytes at global ``offset``; returns the file."""
    f = store / "commitlog" / L.offset_to_file_name(offset - offset % file_size)
    with open(f, "r+b") as fh:
        fh.seek(offset % file_size)
        fh.write(data)
    return f


def _flip_body(store: Path, phys: int, file_size: int) -> None:
    """Flip a bit of the body of the record at ``phys`` (the body starts 88 bytes in for IPv4 hosts)."""
    f = store / "commitlog" / L.offset_to_file_name(phys - phys % file_size)
    b = bytearray(f.read_bytes())
    b[phys % file_size + 88] ^= 0x10
    f.write_bytes(bytes(b))


def _records(store: MessageStore) -> list[MessageExt]:
    return [m for m in store.commitlog.iter_records(verify_crc=True) if isinstance(m, MessageExt)]


# -- 1 -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("step", [-20_000, -2_000])
def test_keys_survive_a_crash_after_the_clock_stepped_back_across_index_rolls(tmp_path: Path, impl,
                                                                                step: int) -> None:
    """The clock steps back (NTP) while index files roll; a crash follows. Index files' end times are
    then not monotonic in file order: deleting those newer than the checkpoint's indexMsgTimestamp
    took one from the middle, and re-dispatch (buildIndex skips offsets below the last file's
    endPhyOffset) never indexed that range again."""
    clock = [T0]
    geom = dict(commitlog_file_size=1 << 20, index_slots=17, index_entries=40)
    with MessageStore(tmp_path, impl=impl.name, clock=lambda: clock[0], **geom) as s:
        for i in range(100):
            if i == 50:
                clock[0] += step
            s.put("T", b"m%d" % i, 0, keys=f"k{i}", properties={"UNIQ_KEY": f"U{i:04d}"})
            clock[0] += 100
        s.dispatch()
        assert len(s.index.index_files) == 6  # 2 keys a message, 39 entries a file
    _crash(tmp_path)
    with MessageStore(tmp_path, impl=impl.name, clock=lambda: clock[0], **geom) as s:
        missing = [i for i in range(100) if s.lookup("T", f"k{i}") != b"m%d" % i]
        # the record at the last kept file's endPhyOffset is indexed again, as RocketMQ's re-dispatch does
        missing += [i for i in range(100) if [m.body for m in s.query_by_key("T", f"U{i:04d}")] not in (
            [b"m%d" % i], [b"m%d" % i] * 2)]
        assert missing == []
        # the files cover the log in physical order: each starts where the previous ended
        heads = [f.header for f in s.index.index_files]
        pairs = zip(heads, heads[1:], strict=False)
        assert all(a.end_phy_offset <= b.begin_phy_offset for a, b in pairs if b.entries)


# -- 2 -----------------------------------------------------------------------------------------------
def test_keys_put_after_a_recovery_cut_are_found(tmp_path: Path, impl) -> None:
    """A damaged record in the middle of the newest CommitLog file and an unclean shutdown: recovery
    cuts there. Index files that reach past the cut made buildIndex skip every later put."""
    geom = dict(commitlog_file_size=64 * 1024, index_slots=17, index_entries=40)
    with MessageStore(tmp_path, impl=impl.name, **geom) as s:
        rs = [s.put("T", b"v%03d" % i + b"." * 200, 0, keys=f"k{i}") for i in range(400)]
        s.dispatch()
        assert len(s.index.index_files) > 3 and len(s.commitlog.queue.files) >= 2
    last_file = rs[-1].physical_offset - rs[-1].physical_offset % (64 * 1024)
    mine = [r for r in rs if r.physical_offset >= last_file]
    victim = mine[len(mine) // 2]
    _flip_body(tmp_path, victim.physical_offset, 64 * 1024)
    _crash(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = MessageStore(tmp_path, impl=impl.name, **geom)
    with s:
        assert s.commitlog.max_offset == victim.physical_offset
        r = s.put("T", b"fresh", 0, keys=["new"])
        assert s.lookup("T", "new") == b"fresh"
        assert [m.position for m in s.query_by_key("T", "new")] == [r.physical_offset]
        assert [w.category for w in caught] == [RecoveryCutWarning]
        kept = [i for i, x in enumerate(rs) if x.physical_offset < victim.physical_offset]
        assert [i for i in kept if s.lookup("T", f"k{i}") != b"v%03d" % i + b"." * 200] == []
        assert s.lookup("T", f"k{len(kept)}") is None
        # nothing indexed points past the cut, but the new record
        for f in s.index.index_files:
            assert f.end_phy_offset < victim.physical_offset or f.end_phy_offset == r.physical_offset


# -- 3 -----------------------------------------------------------------------------------------------
def test_records_recovery_cut_do_not_come_back(tmp_path: Path, impl) -> None:
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20) as s:
        rs = [s.put("T", b"%04d" % i, 0) for i in range(100)]
    _flip_body(tmp_path, rs[50].physical_offset, 1 << 20)
    _crash(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = MessageStore(tmp_path, impl=impl.name)
    with s:
        assert s.max_offset("T", 0) == 50
        r = s.put("T", b"NEW!", 0)  # the same size as the record it replaces
        assert (r.physical_offset, r.size) == (rs[50].physical_offset, rs[50].size)
    with MessageStore(tmp_path, impl=impl.name) as s:  # clean open: normal recovery scans on
        assert s.last_exit_ok
        assert s.max_offset("T", 0) == 51
        assert [m.body for m in _records(s)] == [b"%04d" % i for i in range(50)] + [b"NEW!"]
        assert s.get_messages("g", "T", 0, 51).status == GetStatus.OFFSET_OVERFLOW_ONE
    assert [w.category for w in caught] == [RecoveryCutWarning]  # 49 valid records were cut


# -- 4 -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("crash", [False, True])
def test_a_corrupt_consume_queue_unit_is_rebuilt_from_the_commitlog(tmp_path: Path, impl,
                                                                     crash: bool) -> None:
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20, cq_file_size=400) as s:
        rs = [s.put("T", b"m%d" % i, 0) for i in range(10)]
    cq = tmp_path / "consumequeue" / "T" / "0" / L.offset_to_file_name(0)
    with open(cq, "r+b") as fh:
        fh.seek(9 * L.CQ_UNIT_SIZE + 8)
        fh.write(struct.pack(">i", 0x7FFFFFFF))  # the last unit's size field
    if crash:
        _crash(tmp_path)
    rep = verify_store(tmp_path)
    assert [(p.kind, p.offset) for p in rep.problems if p.kind == "consumequeue"] == [
        ("consumequeue", 9 * L.CQ_UNIT_SIZE)]
    with MessageStore(tmp_path, impl=impl.name, dispatch="background") as s:
        r = s.put("T", b"after", 0)
        assert r.queue_offset == 10
        assert s.wait_dispatched(10)
        got = s.get_messages("g", "T", 0, 9, 2)
        assert got.status == GetStatus.FOUND
        assert [m.body for m in got.messages] == [b"m9", b"after"]
        assert s.consume_queue("T", 0).get(9) == (rs[9].physical_offset, rs[9].size, 0)
        assert [(q.topic, q.queue_id, q.queue_offset) for q in s.recovery.repaired_queues] == [("T", 0, 9)]
    assert verify_store(tmp_path).ok


def test_recover_repairs_a_corrupt_consume_queue_unit_anywhere(tmp_path: Path, impl) -> None:
    """``recover`` checks every unit (an open checks the last ones): a unit in the middle whose offset
    field was damaged is rebuilt, and verify names it before."""
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20, cq_file_size=400) as s:
        rs = [s.put("T", b"m%d" % i, i % 2) for i in range(40)]
    cq = tmp_path / "consumequeue" / "T" / "1" / L.offset_to_file_name(0)
    with open(cq, "r+b") as fh:
        fh.seek(4 * L.CQ_UNIT_SIZE)
        # unit 4 of queue 1 points at another queue's record
        fh.write(struct.pack(">q", rs[3].physical_offset))
    rep = verify_store(tmp_path)
    assert [p.offset for p in rep.problems] == [4 * L.CQ_UNIT_SIZE]
    assert "T/1 unit 4" in rep.problems[0].detail
    p = run_cli("recover", str(tmp_path), "--json", impl=impl.name)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["repaired_queues"] == [{"topic": "T", "queue_id": 1, "queue_offset": 4}]
    assert verify_store(tmp_path).ok
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert [m.body for m in s.iter_queue("T", 1)] == [b"m%d" % i for i in range(1, 40, 2)]


# -- 5 -----------------------------------------------------------------------------------------------
# NUL; NUL and invalid UTF-8 (which goes through the general dispatch path)
@pytest.mark.parametrize("damage", [b"\0", b"\0\xff"])
def test_a_record_whose_topic_cannot_be_dispatched_is_cut_not_fatal(tmp_path: Path, impl,
                                                                     damage: bytes) -> None:
    """The body CRC does not cover the topic. A record whose topic bytes became unusable, then a crash:
    every writable open raised, and ``recover`` exited 1 telling the user to run ``recover``. Recovery
    now cuts there as at any invalid record (RocketMQ's outcome for what follows), warns, and keeps
    the cut bytes in quarantine."""
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20) as s:
        rs = [s.put("TopicX", b"m%d" % i, 0, keys=f"k{i}") for i in range(20)]
    raw = (tmp_path / "commitlog" / L.offset_to_file_name(0)).read_bytes()
    at = raw.index(b"TopicX", rs[12].physical_offset)
    _patch(tmp_path, at + 1, 1 << 20, damage)
    _crash(tmp_path)
    p = run_cli("recover", str(tmp_path), "--json", impl=impl.name)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [(c["offset"], c["records"], c["reason"]) for c in out["cuts"]] == [
        (rs[12].physical_offset, 7, "undispatchable topic")]
    assert "cut 7 valid records" in p.stderr and "quarantine" in p.stderr
    with MessageStore(tmp_path, impl=impl.name) as s:
        assert s.max_offset("TopicX", 0) == 12
        assert s.lookup("TopicX", "k11") == b"m11" and s.lookup("TopicX", "k13") is None
        r = s.put("TopicX", b"again", 0, keys="k13")
        assert s.lookup("TopicX", "k13") == b"again" and r.queue_offset == 12


def test_recover_never_tells_the_user_to_run_recover(tmp_path: Path, impl) -> None:
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20) as s:
        s.put("T", b"x", 0)
    (tmp_path / "checkpoint").write_bytes(b"short")  # unreadable: recovery cannot start
    p = run_cli("recover", str(tmp_path), impl=impl.name)
    assert p.returncode == 1
    assert "rmqcore recover" not in p.stderr and "checkpoint" in p.stderr


# -- 6 -----------------------------------------------------------------------------------------------
def test_a_bit_flip_cut_is_reported_and_quarantined(tmp_path: Path, impl) -> None:
    """Clean shutdown, then a body bit flip in one of the last three CommitLog files: the next open
    cuts there, as RocketMQ does, but never silently."""
    size = 64 * 1024
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=size, cq_file_size=400) as s:
        rs = [s.put("T", b"m%04d" % i + b"." * 200, i % 4, keys=f"k{i}") for i in range(800)]
        nfiles = len(s.commitlog.queue.files)
    assert nfiles == 4
    victim = next(r for r in rs if r.physical_offset > size + 1000)
    k = rs.index(victim)
    _flip_body(tmp_path, victim.physical_offset, size)
    before = {p.name: p.read_bytes() for p in (tmp_path / "commitlog").iterdir()}
    with pytest.warns(RecoveryCutWarning) as w:
        s = MessageStore(tmp_path, impl=impl.name)
    with s:
        assert s.commitlog.max_offset == victim.physical_offset
        (cut,) = s.recovery.cuts
    msg = str(w[0].message)
    assert f"cut {800 - k - 1} valid records" in msg and str(victim.physical_offset) in msg
    assert cut.offset == victim.physical_offset and cut.records == 800 - k - 1
    assert cut.bytes == rs[-1].physical_offset + rs[-1].size - victim.physical_offset
    assert cut.path == str(tmp_path / "commitlog" / L.offset_to_file_name(size))
    # the quarantine holds the cut bytes at their offsets, readable as a CommitLog
    q = Path(cut.quarantine)
    assert q.parent == tmp_path / "quarantine"
    manifest = json.loads((q / "cut.json").read_text())
    assert (manifest["offset"], manifest["records"], manifest["bytes"]) == (
        cut.offset, cut.records, cut.bytes)
    for name, data in before.items():
        off = int(name)
        if off + size <= victim.physical_offset:
            assert not (q / "commitlog" / name).exists()
            continue
        kept = (q / "commitlog" / name).read_bytes()
        lo = max(victim.physical_offset - off, 0)
        assert kept[lo:] == data[lo:] and not any(kept[:lo])
    with CommitLog(q, file_size=size, read_only=True, recover=False) as qcl:
        salvaged = [m for m in qcl.iter_records(rs[k + 1].physical_offset) if isinstance(m, MessageExt)]
    assert [m.body for m in salvaged] == [b"m%04d" % i + b"." * 200 for i in range(k + 1, 800)]
    # the live files end at the cut, zeros after it
    live = (tmp_path / "commitlog" / L.offset_to_file_name(size)).read_bytes()
    assert not any(live[victim.physical_offset - size:])
    assert sorted(p.name for p in (tmp_path / "commitlog").iterdir()) == [
        L.offset_to_file_name(0), L.offset_to_file_name(size)]


def test_restore_quarantined_puts_the_cut_messages_back(tmp_path: Path, impl) -> None:
    from rmqcore.recovery import restore_quarantined

    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20) as s:
        rs = [s.put("T", b"m%d" % i, i % 2, keys=f"k{i}", tags="t") for i in range(30)]
    _flip_body(tmp_path, rs[10].physical_offset, 1 << 20)
    with pytest.warns(RecoveryCutWarning):
        s = MessageStore(tmp_path, impl=impl.name)
    with s:
        (cut,) = s.recovery.cuts
        got = restore_quarantined(s, cut.quarantine)
        # record 10 is the damaged one: 11 .. 29 go back, each in its queue after what stayed
        assert [(r.queue_offset, s.commitlog.read(r.physical_offset).queue_id) for r in got] == [
            ((i - 1) // 2, i % 2) for i in range(11, 30)]
        assert [m.body for m in s.iter_queue("T", 1)] == [b"m%d" % i for i in range(1, 30, 2)]
        assert [m.body for m in s.iter_queue("T", 0)] == [b"m%d" % i for i in range(0, 30, 2) if i != 10]
        assert s.lookup("T", "k29") == b"m29" and s.lookup("T", "k10") is None
        assert [m.tags for m in s.iter_queue("T", 1)] == ["t"] * 15
    assert not Path(cut.quarantine).exists() and Path(cut.quarantine + ".restored").is_dir()


# -- 7 -----------------------------------------------------------------------------------------------
def test_verify_names_a_queue_unit_that_points_at_a_torn_record(tmp_path: Path, impl) -> None:
    with MessageStore(tmp_path, impl=impl.name, commitlog_file_size=1 << 20) as s:
        rs = [s.put("T", b"m%d" % i + b"." * 50, 0) for i in range(10)]
    last = rs[-1]
    _patch(tmp_path, last.physical_offset + 40, 1 << 20, b"\0" * (last.size - 40))
    rep = verify_store(tmp_path)
    assert not rep.ok
    assert (("consumequeue", 9 * L.CQ_UNIT_SIZE) in {(p.kind, p.offset) for p in rep.problems}), rep.problems
    p = run_cli("verify", str(tmp_path), impl=impl.name)
    assert p.returncode == 1 and "T/0 unit 9" in p.stdout


# -- 8 -----------------------------------------------------------------------------------------------
def test_recover_takes_the_flavour_from_the_store(tmp_path: Path, impl, rmq_fixtures: Path) -> None:
    with MessageStore(tmp_path / "ours", impl=impl.name, flavour=4, commitlog_file_size=1 << 20) as s:
        s.put("T", b"x", 0)
    _crash(tmp_path / "ours")
    p = run_cli("recover", str(tmp_path / "ours"), "--json", impl=impl.name)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["flavour"] == 4
    # a store RocketMQ 4.9.8 wrote: detected from its checkpoint layout; the 4.x page is written back
    store = copy_store(rmq_fixtures / "4.9.8" / "storeB", tmp_path / "b")
    p = run_cli("recover", str(store), "--json", *IDX, impl=impl.name)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["flavour"] == 4
    assert not any((store / "checkpoint").read_bytes()[24:]) and not (store / "abort").exists()


# -- 9 -----------------------------------------------------------------------------------------------
def test_consume_queue_file_mtimes_are_their_last_units_store_times(tmp_path: Path, impl) -> None:
    """RocketMQ 4.9.8's getOffsetInQueueByTime picks the first file whose mtime >= the time: each
    full file's mtime is its last unit's store time, and the current one's at flush and close (the
    kernel moves a file's mtime on at each later write to it, pages warmed ahead included: no warm-ahead
    here, so that the flush's mtimes can be looked at)."""
    clock = [T0]
    with MessageStore(tmp_path, impl=impl.name, clock=lambda: clock[0], commitlog_file_size=1 << 20,
                      cq_file_size=200, logics_warm_ahead=0) as s:
        for i in range(35):
            s.put("T", b"m%d" % i, 0)
            clock[0] += 1000
        s.flush()
        d = tmp_path / "consumequeue" / "T" / "0"
        assert {p.name: p.stat().st_mtime_ns for p in d.iterdir()} == {
            L.offset_to_file_name(200 * k): (T0 + 1000 * min(10 * k + 9, 34)) * 1_000_000 for k in range(4)}
        s.put("T", b"last", 0)
    assert (d / L.offset_to_file_name(600)).stat().st_mtime_ns == (T0 + 35_000) * 1_000_000
    assert (d / L.offset_to_file_name(0)).stat().st_mtime_ns == (T0 + 9_000) * 1_000_000
