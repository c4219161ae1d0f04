"""MessageStore against the golden stores: consume queues, pulls, and byte-identical replays."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from rmqcore.store import MessageStore
from tests.conftest import VERSIONS
from tests.rocketmq import manifest as M
from tests.rocketmq.test_commitlog_fixtures import _replay

GEOM = dict(commitlog_file_size=131072, cq_file_size=2000, index_slots=100, index_entries=1000)


def _open_ro(path: Path, impl: str, index: bool = False) -> MessageStore:
    return MessageStore(path, read_only=True, impl=impl, message_index_enable=index, **GEOM)


@pytest.mark.parametrize("store", ("A", "C"))
@pytest.mark.parametrize("version", VERSIONS)
def test_consume_queues_and_pulls_match_rocketmq(impl, rmq_fixtures: Path, version: str, store: str) -> None:
    dump = M.load(rmq_fixtures / version, store, "dump")
    by_type = defaultdict(list)
    for o in dump:
        by_type[o["type"]].append(o)
    with _open_ro(rmq_fixtures / version / f"store{store}", impl.name) as s:
        # cq_queue: bounds of every queue that has files
        assert {(o["topic"], o["queueId"]) for o in by_type["cq_queue"]} == set(s.consume_queues)
        for o in by_type["cq_queue"]:
            cq = s.consume_queue(o["topic"], o["queueId"])
            assert (cq.min_offset, cq.max_offset, cq.max_physic_offset, cq.min_logic_offset) == (
                o["minOffset"], o["maxOffset"], o["maxPhysicOffset"], o["minLogicOffset"]), o
            assert s.store_time_of(cq.get(cq.min_offset)[0]) == o["storeTimeOfMin"]
            assert s.store_time_of(cq.get(cq.max_offset - 1)[0]) == o["storeTimeOfMaxMinus1"]
        # cq: every unit
        for o in by_type["cq"]:
            unit = s.consume_queue(o["topic"], o["queueId"]).get(o["queueOffset"])
            assert unit == (o["phyOffset"], o["size"], o["tagsCode"]), o
        # pull: getMessage(group, topic, queue, offset, 32) from min to max
        assert by_type["pull"]
        for o in by_type["pull"]:
            r = s.get_messages("oracle", o["topic"], o["queueId"], o["requestOffset"], 32)
            assert (r.status, r.next_begin_offset, r.min_offset, r.max_offset, r.message_count) == (
                o["status"], o["nextBeginOffset"], o["minOffset"], o["maxOffset"], o["messageCount"]), o
            assert r.physical_offsets == o["phyOffsets"]
            assert r.queue_offsets == o["queueOffsets"]


@pytest.mark.parametrize("store", ("A", "C"))
@pytest.mark.parametrize("version", VERSIONS)
def test_replaying_manifest_writes_identical_consume_queues(
    impl, rmq_fixtures: Path, tmp_path: Path, version: str, store: str
) -> None:
    lines = M.load(rmq_fixtures / version, store, "manifest")
    dump = M.load(rmq_fixtures / version, store, "dump")
    born = {o["phyOffset"]: o["bornTimestamp"] for o in dump if o["type"] == "msg"}
    clock = [0]
    flavour = 4 if version.startswith("4") else 5
    s = MessageStore(
        tmp_path, impl=impl.name, flavour=flavour, store_host="198.51.100.7:10911", clock=lambda: clock[0],
        **GEOM,
    )
    with s:
        _replay(s, lines[1:], clock, born)
    src = rmq_fixtures / version / f"store{store}" / "consumequeue"
    want = sorted(p.relative_to(src) for p in src.rglob("*") if p.is_file())
    have = sorted(p.relative_to(tmp_path / "consumequeue") for p in (tmp_path / "consumequeue").rglob("*") if p.is_file())
    assert have == want
    for rel in want:
        assert (src / rel).read_bytes() == (tmp_path / "consumequeue" / rel).read_bytes(), rel
    cl_src = rmq_fixtures / version / f"store{store}" / "commitlog"
    for p in cl_src.iterdir():
        assert p.read_bytes() == (tmp_path / "commitlog" / p.name).read_bytes(), p.name
    # index files: identical contents (their names are wall-clock creation times)
    idx_src = sorted((rmq_fixtures / version / f"store{store}" / "index").iterdir())
    idx_ours = sorted((tmp_path / "index").iterdir())
    assert [p.read_bytes() for p in idx_ours] == [p.read_bytes() for p in idx_src]


@pytest.mark.parametrize("store", ("A", "C"))
@pytest.mark.parametrize("version", VERSIONS)
def test_offset_by_time_matches_rocketmq(impl, rmq_fixtures: Path, version: str, store: str) -> None:
    """5.3.3's default getOffsetInQueueByTime is LOWER; 4.9.8 returns the nearest unit (its file
    choice by mtime is replaced by the last unit's store time, which is what the golden mtimes are)."""
    boundary = "nearest" if version.startswith("4") else "lower"
    lines = [o for o in M.load(rmq_fixtures / version, store, "dump") if o["type"] == "offset_by_time"]
    assert len(lines) > 900
    with _open_ro(rmq_fixtures / version / f"store{store}", impl.name) as s:
        got = [s.offset_by_time(o["topic"], o["queueId"], o["timestamp"], boundary) for o in lines]
        assert got == [o["result"] for o in lines]
        # LOWER/UPPER by definition: LOWER is the first message stored at or after ts, UPPER the
        # last one stored at or before it (single-file queues here)
        cache: dict[tuple[str, int], list[int]] = {}
        for o in lines[:: 3 if version.startswith("5") else 7]:
            key = (o["topic"], o["queueId"])
            if key not in cache:
                cq = s.consume_queue(*key)
                cache[key] = [s.store_time_of(cq.get(q)[0]) for q in range(cq.min_offset, cq.max_offset)]
            times = cache[key]
            ts = o["timestamp"]
            lo = s.offset_by_time(o["topic"], o["queueId"], ts, "lower")
            up = s.offset_by_time(o["topic"], o["queueId"], ts, "upper")
            assert lo == next((q for q, t in enumerate(times) if t >= ts), len(times))
            if times[0] <= ts:
                assert up == max(q for q, t in enumerate(times) if t <= ts)
            else:
                assert up == 0
