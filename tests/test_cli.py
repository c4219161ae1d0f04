"""The ``rmqcore`` command, run as a subprocess and checked against the golden dumps."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import struct
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


# -- info, stats, dump checkpoint, bench; exit codes and error lines of every command ------------------
def _digest(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every file and directory under ``root``: content hash, size and mtime (ns)."""
    out = {}
    for p in sorted(root.rglob("*")):
        st = p.stat()
        h = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        out[str(p.relative_to(root))] = (h, st.st_size, st.st_mtime_ns)
    return out


ERROR_LINE = re.compile(r"^rmqcore: error: [^\n;]+(?:;[^\n]+)?; [^\n]+\n$")


def _checkpoint_fields(path: Path) -> tuple[int, ...]:
    return struct.unpack_from(">qqqqq", path.read_bytes(), 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_info_reports_the_store_and_changes_nothing(rmq_fixtures: Path, tmp_path: Path, version: str) -> None:
    from rmqcore.store import MessageStore

    store = copy_store(rmq_fixtures / version / "storeB", tmp_path / "b")  # crashed: abort present
    (store / "lock").unlink()  # a read-only command must not create it
    before = _digest(store)
    p = run_cli("info", str(store), "--json", *IDX)
    assert p.returncode == 0, p.stderr
    assert _digest(store) == before  # no lock, no abort change, no recovery writes, no mtime touched
    info = json.loads(p.stdout)
    with MessageStore(store, read_only=True, message_index_enable=False) as s:
        cl = s.commitlog
        assert info["commitlog"]["min_offset"] == cl.min_offset
        assert info["commitlog"]["max_offset"] == cl.max_offset
        assert info["dispatch"] == {"reput_from_offset": s.reput_from_offset, "lag_bytes": s.dispatch_lag}
        # the consume queues hold every record to the last one: the file after it, allocated ahead,
        # is no data (a read-only open took its start for the end, and reported that as a lag)
        last_file = int(max(p.name for p in (store / "commitlog").iterdir()))
        assert info["dispatch"]["lag_bytes"] == 0 and cl.max_offset < last_file
        assert info["consume_queues"] == {"topics": 3, "queues": len(s.consume_queues)}
    names = sorted(p.name for p in (store / "commitlog").iterdir())
    assert [f["name"] for f in info["commitlog"]["files"]] == names
    assert all(f["size"] == 131072 for f in info["commitlog"]["files"])
    assert info["geometry"]["commitlog_file_size"] == 131072 and info["geometry"]["cq_file_size"] == 2000
    assert (info["geometry"]["index_slots"], info["geometry"]["index_entries"]) == (100, 1000)
    assert [f["name"] for f in info["index_files"]] == sorted(p.name for p in (store / "index").iterdir())
    assert info["flavour"] == int(version[0])
    fields = _checkpoint_fields(store / "checkpoint")
    cp = info["checkpoint"]
    assert (cp["physic_msg_timestamp"], cp["logics_msg_timestamp"], cp["index_msg_timestamp"]) == fields[:3]
    assert cp["min_timestamp"] == min(fields[:2]) - 3000
    assert info["commitlog"]["confirm_offset"] == (fields[4] if version.startswith("5") else None)
    assert info["abort"]["exists"] and not info["last_shutdown_clean"]
    assert info["lock"] == {"exists": False, "held": False, "pid": None}
    p = run_cli("info", str(store))  # no index options: slots and entries cannot both come from a file size
    assert p.returncode == 0 and "ABNORMAL" in p.stdout and f"max {info['commitlog']['max_offset']}" in p.stdout
    assert "index geometry unknown (pass --index-slots/--index-entries)" in p.stdout
    assert _digest(store) == before


def test_info_sees_the_lock_and_recover_refuses_a_locked_store(rmq_fixtures: Path, tmp_path: Path) -> None:
    from rmqcore.store import MessageStore

    store = copy_store(rmq_fixtures / "5.3.3" / "storeA", tmp_path / "a")
    with MessageStore(store, read_only=False, message_index_enable=False):  # this process holds the lock
        p = run_cli("info", str(store), "--json")
        assert p.returncode == 0, p.stderr
        info = json.loads(p.stdout)
        assert info["lock"] == {"exists": True, "held": True, "pid": os.getpid()}
        p = run_cli("recover", str(store))  # the writable open above saved rmqcore.json (geometry)
        assert p.returncode == 1 and ERROR_LINE.match(p.stderr), p.stderr
        assert "lock" in p.stderr and "read-only command" in p.stderr
    p = run_cli("info", str(store), "--json")
    assert json.loads(p.stdout)["lock"] == {"exists": True, "held": False, "pid": None}


@pytest.mark.parametrize("version", VERSIONS)
def test_dump_checkpoint_layouts(rmq_fixtures: Path, version: str) -> None:
    store = rmq_fixtures / version / "storeB"
    fields = _checkpoint_fields(store / "checkpoint")
    p = run_cli("dump", "checkpoint", str(store), "--json")
    assert p.returncode == 0, p.stderr
    cp = json.loads(p.stdout)
    names = ["physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp", "master_flushed_offset",
             "confirm_phy_offset"]
    n = 5 if version.startswith("5") else 3
    assert cp["layout"] == int(version[0]) and cp["size"] == 4096
    assert {k: cp[k] for k in names if k in cp} == dict(zip(names[:n], fields[:n], strict=True))
    assert cp["min_timestamp"] == min(fields[:2]) - 3000
    p = run_cli("dump", "checkpoint", str(store))
    assert p.returncode == 0
    iso = _dt.datetime.fromtimestamp(fields[0] / 1000, tz=_dt.timezone.utc).isoformat(timespec="milliseconds")
    assert "physicMsgTimestamp" in p.stdout and str(fields[0]) in p.stdout and iso in p.stdout
    assert ("confirmPhyOffset" in p.stdout) == (n == 5)
    p = run_cli("dump", "checkpoint", str(store), "--flavour", "5", "--json")  # forced layout
    assert json.loads(p.stdout)["confirm_phy_offset"] == fields[4]


@pytest.mark.parametrize("version", VERSIONS)
def test_stats_matches_the_consume_queues_rocketmq_dumped(rmq_fixtures: Path, version: str) -> None:
    from rmqcore.store import MessageStore

    store = rmq_fixtures / version / "storeA"
    dump = M.load(rmq_fixtures / version, "A", "dump")
    units: dict[tuple[str, int], list[dict]] = {}
    for o in dump:
        if o["type"] == "cq":
            units.setdefault((o["topic"], o["queueId"]), []).append(o)
    p = run_cli("stats", str(store), "--json")
    assert p.returncode == 0, p.stderr
    rows = [json.loads(x) for x in p.stdout.splitlines()]
    queues, total = rows[:-1], rows[-1]
    assert {(r["topic"], r["queue_id"]) for r in queues} == set(units)
    with MessageStore(store, read_only=True, message_index_enable=False) as s:
        for r in queues:
            us = units[(r["topic"], r["queue_id"])]
            assert r["messages"] == len(us) == r["max_offset"] - r["min_offset"]
            assert r["min_offset"] == min(u["queueOffset"] for u in us)
            assert r["max_offset"] == max(u["queueOffset"] for u in us) + 1
            assert r["bytes"] == sum(u["size"] for u in us)
            assert r["earliest_store_time"] == s.store_time_of(min(us, key=lambda u: u["queueOffset"])["phyOffset"])
            assert r["latest_store_time"] == s.store_time_of(max(us, key=lambda u: u["queueOffset"])["phyOffset"])
    assert total["messages"] == 2000 and total["queues"] == 12 and total["topics"] == 3
    assert total["bytes"] == sum(u["size"] for us in units.values() for u in us)
    p = run_cli("stats", str(store), "--topic", "TopicC")
    assert p.returncode == 0 and p.stdout.splitlines()[-1].startswith("total: 1 topics, 4 queues")
    p = run_cli("stats", str(store), "--topic", "NoSuchTopic")
    assert p.returncode == 1 and ERROR_LINE.match(p.stderr), p.stderr


def test_offset_by_time_json_and_query_without_match(rmq_fixtures: Path) -> None:
    store = rmq_fixtures / "5.3.3" / "storeA"
    dump = M.load(rmq_fixtures / "5.3.3", "A", "dump")
    o = [o for o in dump if o["type"] == "offset_by_time" and o["topic"] == "TopicA"][7]
    p = run_cli("offset-by-time", str(store), "--topic", "TopicA", "--queue", str(o["queueId"]),
                "--time", str(o["timestamp"]), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"topic": "TopicA", "queue_id": o["queueId"], "time": o["timestamp"],
                                    "boundary": "lower", "offset": o["result"]}
    p = run_cli("query", str(store), "--topic", "TopicA", "--key", "no-such-key-anywhere", *IDX)
    assert p.returncode == 1 and p.stdout == "" and ERROR_LINE.match(p.stderr), p.stderr


def test_kafka_commands_through_rmqcore(rmq_fixtures: Path) -> None:
    kdir = rmq_fixtures.parent / "kafka" / "v2_transactions"
    manifest = json.loads((kdir / "manifest.json").read_text())
    p = run_cli("kafka", "dump", str(kdir), "--json")
    assert p.returncode == 0, p.stderr
    batches = [json.loads(x) for x in p.stdout.splitlines() if '"batch"' in x]
    want = [(b["position"], b["size"], b["last_offset"]) for s in manifest["segments"] for b in s["batches"]]
    assert [(b["position"], b["size"], b["last_offset"]) for b in batches] == want
    p = run_cli("kafka", "lookup", str(kdir), "--offset", "5", "--json")
    assert p.returncode == 0 and json.loads(p.stdout) == {"batch_last_offset": 5, "position": 220, "batch_size": 211}
    crash = rmq_fixtures.parent / "kafka" / "v2_open_segment_crash_image"
    p = run_cli("kafka", "lookup", str(crash), "--offset", "252")
    assert p.returncode == 1 and ERROR_LINE.match(p.stderr) and "offset 40346" in p.stderr, p.stderr
    p = run_cli("kafka", "dump", str(kdir / "missing"))
    assert p.returncode == 2 and ERROR_LINE.match(p.stderr), p.stderr


def test_every_store_command_rejects_a_missing_directory_with_one_line(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere")
    commands = [
        ["info", missing], ["stats", missing], ["dump", "checkpoint", missing], ["dump", "commitlog", missing],
        ["dump", "cq", missing, "T", "0"], ["dump", "index", missing], ["verify", missing], ["recover", missing],
        ["query", missing, "--topic", "T", "--key", "k"], ["get", missing, "--topic", "T", "--queue", "0",
                                                          "--offset", "0"],
        ["offset-by-time", missing, "--topic", "T", "--queue", "0", "--time", "0"],
    ]
    for argv in commands:
        p = run_cli(*argv, "--json")
        assert p.returncode == 2, argv
        assert p.stdout == "" and ERROR_LINE.match(p.stderr) and missing in p.stderr, (argv, p.stderr)
    assert not (tmp_path / "nowhere").exists()  # recover did not create it
    p = run_cli("info", str(tmp_path), "--commitlog-file-size", "x")
    assert p.returncode == 2 and ERROR_LINE.match(p.stderr) and "Traceback" not in p.stderr, p.stderr
    p = run_cli("stats")
    assert p.returncode == 2 and ERROR_LINE.match(p.stderr), p.stderr


def test_verify_progress_goes_to_stderr_only_when_asked(rmq_fixtures: Path) -> None:
    store = str(rmq_fixtures / "4.9.8" / "storeA")
    p = run_cli("verify", store, "--json", "--progress", *IDX)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["messages"] == 2000 and "verify [" in p.stderr and "100%" in p.stderr
    p = run_cli("verify", store, "--json", *IDX)  # stderr is a pipe here: no bar
    assert p.returncode == 0 and p.stderr == ""


def test_bench_runs_the_peer_comparison(tmp_path: Path) -> None:
    from tests.conftest import SHARED

    out = tmp_path / "bench.json"
    p = run_cli("bench", "--n", "2000", "--peers", "rmqcore,sqlite3", "--repeat", "1", "--lookups", "2000",
                "--workdir", str(tmp_path / "wd"), "--json", str(out),
                "--peers-script", str(SHARED / "tools" / "peers.py"))
    assert p.returncode == 0, p.stdout + p.stderr
    rows: dict[str, list[str]] = {}
    for line in p.stdout.splitlines():  # the first table: W1 k msg/s, W1 MB/s, close s, W2, W3, W4, disk MB
        if line.startswith(("rmqcore ", "sqlite3 ")):
            rows.setdefault(line.split()[0], line.split()[1:])
    assert len(rows["rmqcore"]) == 7 and all(float(v) > 0 for v in rows["rmqcore"][:2] + rows["rmqcore"][3:])
    summary = json.loads(out.read_text())["summary"]
    w1 = summary["rmqcore"]["W1_msgs_s"]["median"]
    assert float(rows["rmqcore"][0]) == pytest.approx(w1 / 1e3, abs=0.051) and w1 > 0
    assert summary["rmqcore"]["W1_count"] == [2000] and summary["sqlite3"]["W1_count"] == [2000]
    env_missing = run_cli("bench", "--peers-script", str(tmp_path / "nope.py"))
    assert env_missing.returncode == 2 and ERROR_LINE.match(env_missing.stderr)
    assert "--peers-script" in env_missing.stderr and "RMQCORE_SHARED" in env_missing.stderr
    assert str(tmp_path / "nope.py") in env_missing.stderr
