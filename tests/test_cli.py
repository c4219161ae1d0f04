"""The ``rmqcore`` command, run as a subprocess and checked against the golden dumps."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import VERSIONS, copy_store
from tests.rocketmq import manifest as M


ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, impl: str = "auto") -> subprocess.CompletedProcess[str]:
    """``python -m rmqcore.cli ARGS`` in a child that imports this checkout's rmqcore."""
    env = dict(os.environ, RMQCORE_IMPL=impl)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return subprocess.run(
        [sys.executable, "-m", "rmqcore.cli", *args], capture_output=True, text=True, env=env, timeout=300,
        cwd=ROOT,
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_dump_commitlog_json_matches_real_rocketmq(rmq_fixtures: Path, version: str) -> None:
    store = rmq_fixtures / version / "storeC"
    p = run_cli("dump", "commitlog", str(store), "--json")
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    dump = [o for o in M.load(rmq_fixtures / version, "C", "dump") if o["type"] in ("msg", "blank")]
    assert len(lines) == len(dump)
    for got, exp in zip(lines, dump):
        assert got["physical_offset"] == exp["phyOffset"]
        if exp["type"] == "blank":
            assert (got["type"], got["size"]) == ("blank", exp["declaredSize"])
            continue
        want_host = exp["bornHost"].replace("|", ":")
        assert got["type"] == "msg"
        assert (got["size"], got["magic"], got["body_crc"], got["queue_id"], got["flag"]) == (
            exp["totalSize"], int(exp["magic"], 16), exp["bodyCRC"], exp["queueId"], exp["flag"])
        assert (got["queue_offset"], got["sys_flag"], got["born_timestamp"], got["born_host"]) == (
            exp["queueOffset"], exp["sysFlag"], exp["bornTimestamp"], want_host)
        assert (got["store_timestamp"], got["store_host"], got["reconsume_times"]) == (
            exp["storeTimestamp"], exp["storeHost"].replace("|", ":"), exp["reconsumeTimes"])
        assert got["prepared_transaction_offset"] == exp["preparedTransactionOffset"]
        assert (got["topic"], got["properties"], got["body_len"], got["body_sha256"], got["msg_id"]) == (
            exp["topic"], exp["properties"], exp["body_len"], exp["body_sha256"], exp["msgId"])
        assert got["tags"] == exp["tags"]
        assert got["keys"] == [k for k in (exp["keys"] or "").split(" ") if k]


def test_dump_commitlog_reports_torn_record_and_fails(rmq_fixtures: Path) -> None:
    store = rmq_fixtures / "4.9.8" / "storeB2"
    p = run_cli("dump", "commitlog", str(store), "--json", "--from", "1572864")
    assert p.returncode == 1
    last = json.loads(p.stdout.splitlines()[-1])
    assert last["type"] == "stop" and last["physical_offset"] == 1652883
    assert "1652883" in p.stderr and "00000000000001572864" in p.stderr
    first = json.loads(p.stdout.splitlines()[0])
    assert first["physical_offset"] == 1572864


def test_dump_commitlog_text_and_usage_errors(rmq_fixtures: Path, tmp_path: Path) -> None:
    p = run_cli("dump", "commitlog", str(rmq_fixtures / "5.3.3" / "storeA"))
    assert p.returncode == 0
    assert p.stdout.splitlines()[0].split()[:2] == ["0", "msg"]
    assert "blank" in p.stdout
    p = run_cli("dump", "commitlog", str(tmp_path))
    assert p.returncode == 2 and "commitlog" in p.stderr
    p = run_cli("dump")
    assert p.returncode == 2
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / "00000000000000000000").write_bytes(b"\0" * 5000)
    p = run_cli("dump", "commitlog", str(tmp_path), "--commitlog-file-size", "4096")
    assert p.returncode == 2 and "length 5000" in p.stderr  # geometry that does not fit the files: usage


@pytest.mark.parametrize("version", VERSIONS)
def test_dump_cq_get_and_offset_by_time(rmq_fixtures: Path, version: str) -> None:
    store = rmq_fixtures / version / "storeA"
    dump = M.load(rmq_fixtures / version, "A", "dump")
    cq = [o for o in dump if o["type"] == "cq" and o["topic"] == "TopicC" and o["queueId"] == 3]
    p = run_cli("dump", "cq", str(store), "TopicC", "3", "--json")
    assert p.returncode == 0, p.stderr
    got = [json.loads(x) for x in p.stdout.splitlines()]
    assert got == [{"queue_offset": o["queueOffset"], "physical_offset": o["phyOffset"], "size": o["size"],
                    "tags_code": o["tagsCode"]} for o in cq]

    pulls = [o for o in dump if o["type"] == "pull" and o["topic"] == "TopicB_longer-name_01"][:3]
    for o in pulls:
        p = run_cli("get", str(store), "--topic", o["topic"], "--queue", str(o["queueId"]),
                    "--offset", str(o["requestOffset"]), "--json")
        assert p.returncode == 0, p.stderr
        assert json.loads(p.stdout) == {"status": o["status"], "next_begin_offset": o["nextBeginOffset"],
                                        "min_offset": o["minOffset"], "max_offset": o["maxOffset"],
                                        "physical_offsets": o["phyOffsets"]}

    boundary = "nearest" if version.startswith("4") else "lower"
    obt = [o for o in dump if o["type"] == "offset_by_time" and o["topic"] == "TopicC"][10:14]
    for o in obt:
        p = run_cli("offset-by-time", str(store), "--topic", o["topic"], "--queue", str(o["queueId"]),
                    "--time", str(o["timestamp"]), "--boundary", boundary)
        assert p.returncode == 0, p.stderr
        assert int(p.stdout) == o["result"]


def test_store_commands_usage_errors(tmp_path: Path, rmq_fixtures: Path) -> None:
    p = run_cli("get", str(tmp_path), "--topic", "T", "--queue", "0", "--offset", "0")
    assert p.returncode == 2 and "commitlog" in p.stderr
    p = run_cli("dump", "cq", str(rmq_fixtures / "4.9.8" / "storeA"), "NoSuchTopic", "0")
    assert p.returncode == 1 and "NoSuchTopic" in p.stderr
    p = run_cli("offset-by-time", str(rmq_fixtures / "4.9.8" / "storeA"), "--topic", "T", "--queue", "0")
    assert p.returncode == 2


IDX = ["--index-slots", "100", "--index-entries", "1000"]


@pytest.mark.parametrize("version", VERSIONS)
def test_dump_index_and_query(rmq_fixtures: Path, version: str) -> None:
    store = rmq_fixtures / version / "storeA"
    dump = M.load(rmq_fixtures / version, "A", "dump")
    p = run_cli("dump", "index", str(store), "--json", *IDX)
    assert p.returncode == 0, p.stderr
    got = [json.loads(x) for x in p.stdout.splitlines()]
    want = [o for o in dump if o["type"] == "index_file"]
    assert [(g["name"], g["begin_timestamp"], g["end_timestamp"], g["begin_phy_offset"], g["end_phy_offset"],
             g["hash_slot_count"], g["index_count"]) for g in got] == [
        (o["name"], o["beginTimestamp"], o["endTimestamp"], o["beginPhyOffset"], o["endPhyOffset"],
         o["hashSlotCount"], o["indexCount"]) for o in want]
    # Aa and BB share a String.hashCode: raw mode returns RocketMQ's answer, exact mode drops collisions
    q = next(o for o in dump if o["type"] == "query" and o["topic"] == "TopicA" and o["key"] == "Aa"
             and o["begin"] == 0 and o["end"] == 2**63 - 1)
    p = run_cli("query", str(store), "--topic", "TopicA", "--key", "Aa", "--raw", "--json", *IDX)
    assert p.returncode == 0, p.stderr
    raw = [json.loads(x) for x in p.stdout.splitlines()]
    assert [m["physical_offset"] for m in raw] == q["queryMessage_phyOffsets"]
    p = run_cli("query", str(store), "--topic", "TopicA", "--key", "Aa", "--json", *IDX)
    exact = [json.loads(x) for x in p.stdout.splitlines()]
    assert 0 < len(exact) < len(raw)
    assert all("Aa" in m["keys"] or m["uniq_key"] == "Aa" for m in exact)
    assert [m for m in raw if "Aa" in m["keys"] or m["uniq_key"] == "Aa"] == exact
    p = run_cli("dump", "index", str(store))
    assert p.returncode == 2 and "--index-slots" in p.stderr


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_verify_reports_problems_and_changes_nothing(rmq_fixtures: Path, tmp_path: Path) -> None:
    good = rmq_fixtures / "5.3.3" / "storeA"
    p = run_cli("verify", str(good), "--json", *IDX)
    assert p.returncode == 0, p.stdout + p.stderr
    rep = json.loads(p.stdout)
    assert rep["ok"] and rep["messages"] == 2000 and rep["blanks"] == 20 and rep["index_files"] == 5
    torn = copy_store(rmq_fixtures / "4.9.8" / "storeB2", tmp_path / "b2")
    before = _tree(torn)
    p = run_cli("verify", str(torn), "--json", *IDX)
    assert p.returncode == 1
    rep = json.loads(p.stdout)
    kinds = {(x["kind"], x["offset"]) for x in rep["problems"]}
    assert ("commitlog", 1652883) in kinds and any(k == "unclean-shutdown" for k, _ in kinds)
    assert _tree(torn) == before  # nothing changed
    p = run_cli("verify", str(torn), *IDX)
    assert p.returncode == 1 and "PROBLEM commitlog" in p.stdout and "1652883" in p.stdout


def test_recover_repairs_in_place_then_verify_is_clean(rmq_fixtures: Path, tmp_path: Path) -> None:
    torn = copy_store(rmq_fixtures / "4.9.8" / "storeB2", tmp_path / "b2")
    p = run_cli("recover", str(torn), "--flavour", "4", "--json", "--progress", *IDX)
    assert p.returncode == 0, p.stderr
    assert "recover [" in p.stderr and "100%" in p.stderr
    out = json.loads(p.stdout)
    assert out["abnormal"] and out["clean"] and out["max_offset"] == 1652883
    assert not (torn / "abort").exists()
    p = run_cli("verify", str(torn), "--json", *IDX)
    assert p.returncode == 0, p.stdout
    p = run_cli("recover", str(tmp_path / "nothing"))
    assert p.returncode == 2
