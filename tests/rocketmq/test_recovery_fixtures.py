"""Recovery of the crashed golden stores B (kill -9) and B2 (kill -9 + torn last record).

Recovering a copy must yield the messages, consume queues, queue bounds and index answers of the
dump (what the real code reads after its own recovery), and files equal to
``store*_after_java_recovery`` (index file names aside: they are wall-clock creation times; and
what recovery cut, which RocketMQ leaves in place and rmqcore zeroes).
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from rmqcore.commitlog import ScanStop
from rmqcore.message import MessageExt
from rmqcore.store import MessageStore
from tests.conftest import VERSIONS, copy_store
from tests.rocketmq import manifest as M

GEOM = dict(commitlog_file_size=131072, cq_file_size=2000, index_slots=100, index_entries=1000)


def _files(root: Path, sub: str) -> dict[str, bytes]:
    d = root / sub
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("store", ("B", "B2"))
@pytest.mark.parametrize("version", VERSIONS)
def test_recovering_crashed_store_matches_rocketmq(impl, rmq_fixtures: Path, tmp_path: Path, version: str,
                                                   store: str) -> None:
    src = rmq_fixtures / version / f"store{store}"
    work = copy_store(src, tmp_path / "s")
    assert (work / "abort").exists()
    flavour = 4 if version.startswith("4") else 5
    dump = M.load(rmq_fixtures / version, store, "dump")
    by_type = defaultdict(list)
    for o in dump:
        by_type[o["type"]].append(o)
    with MessageStore(work, impl=impl.name, flavour=flavour, **GEOM) as s:
        assert not s.last_exit_ok
        load = by_type["load"][0]
        assert (s.commitlog.min_offset, s.commitlog.max_offset) == (
            load["after_recovery_minPhyOffset"], load["after_recovery_maxPhyOffset"])
        msgs = [m for m in s.commitlog.iter_records() if isinstance(m, MessageExt)]
        assert [m.position for m in msgs] == [o["phyOffset"] for o in by_type["msg"]]
        assert not any(isinstance(m, ScanStop) for m in s.commitlog.iter_records())
        for o in by_type["cq_queue"]:
            assert (s.min_offset(o["topic"], o["queueId"]), s.max_offset(o["topic"], o["queueId"])) == (
                o["minOffset"], o["maxOffset"]), o
        for o in by_type["cq"]:
            assert s.consume_queue(o["topic"], o["queueId"]).get(o["queueOffset"]) == (
                o["phyOffset"], o["size"], o["tagsCode"])
        queries = by_type["query"]
        assert queries
        for o in queries[:: max(1, len(queries) // 1500)]:
            raw, _, _ = s.index.query_offset(o["topic"], o["key"], 64, o["begin"], o["end"])
            assert raw == o["queryOffset_raw_phyOffsets"], o
        # the store takes new writes after recovery
        r = s.put("TopicA", b"after recovery", 0)
        assert r.physical_offset == load["after_recovery_maxPhyOffset"]
    # files equal to what the real recovery left (our new write aside: compare before it)
    want = rmq_fixtures / version / f"store{store}_after_java_recovery"
    work2 = copy_store(src, tmp_path / "s2")
    with MessageStore(work2, impl=impl.name, flavour=flavour, **GEOM):
        pass
    # the CommitLog as the real recovery left it up to its end; past it RocketMQ leaves the cut bytes
    # (B2: the torn record) where rmqcore zeroes them (a later scan cannot read them again)
    end = load["after_recovery_maxPhyOffset"]
    ours_cl, theirs_cl = _files(work2, "commitlog"), _files(want, "commitlog")
    assert ours_cl.keys() == theirs_cl.keys()
    for name, data in ours_cl.items():
        keep = min(max(end - int(name), 0), len(data))
        assert data[:keep] == theirs_cl[name][:keep] and not any(data[keep:]), name
    assert (ours_cl == theirs_cl) == (store == "B")
    # consume queues too: units of cut records RocketMQ leaves past the queue's end, rmqcore zeroes
    ours_cq, theirs_cq = _files(work2, "consumequeue"), _files(want, "consumequeue")
    assert ours_cq.keys() == theirs_cq.keys()
    for name, data in ours_cq.items():
        for i in range(0, len(data), 20):
            a, b = data[i : i + 20], theirs_cq[name][i : i + 20]
            assert a == b or (not any(a) and int.from_bytes(b[:8], "big") >= end), (name, i)
    ours = list(_files(work2, "index").values())
    theirs = list(_files(want, "index").values())
    assert ours == theirs
    assert not (work2 / "abort").exists()
