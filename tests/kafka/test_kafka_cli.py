"""``rmqcore kafka dump|lookup``: JSON output checked against every manifest; exit codes; the
``register(subparsers)`` hook the lead mounts under ``rmqcore``."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rmqcore.kafka import cli

ROOT = Path(__file__).resolve().parents[2]
_SHARED = Path(__file__).resolve().parents[3] / "shared"
if not _SHARED.is_dir():  # allow an override, as tests/conftest.py does
    _SHARED = Path(os.environ.get("RMQCORE_SHARED", _SHARED))
FIXTURES = _SHARED / "fixtures"
SCENARIOS = sorted(
    p.parent.relative_to(FIXTURES).as_posix()
    for p in [*FIXTURES.glob("kafka/*/manifest.json"), *FIXTURES.glob("kafka-real-broker/*/manifest.json")]
)
CRASH = "kafka/v2_open_segment_crash_image"


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def run_subprocess(*argv: str, impl: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if impl:
        env["RMQCORE_IMPL"] = impl
    return subprocess.run(
        [sys.executable, "-m", "rmqcore.kafka.cli", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def manifest_kv(r: dict[str, Any], name: str) -> str | None:
    return r[name + "_hex"] if name + "_hex" in r else r[name]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_dump_json_matches_manifest(
    scenario: str, kx: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    d = FIXTURES / scenario
    m = kx.manifest(d)
    rc, out, err = run_main(["dump", str(d), "--json"], capsys)
    lines = [json.loads(line) for line in out.splitlines()]
    batches = [x for x in lines if x["type"] == "batch"]
    records = [x for x in lines if x["type"] == "record"]
    expected_batches = []
    expected_records = []
    for s in m["segments"]:
        for b in s["batches"]:
            if isinstance(b, list):  # real-broker compact form
                pos, size, base, last, max_ts, _crc, count = b
                expected_batches.append(
                    {
                        "type": "batch",
                        "segment": s["base_offset"],
                        "position": pos,
                        "size": size,
                        "magic": 2,
                        "base_offset": base,
                        "last_offset": last,
                        "max_timestamp": max_ts,
                        "crc_valid": True,
                        "compression": "none",
                        "record_count": count,
                    }
                )
                continue
            expected_batches.append(
                {
                    "type": "batch",
                    "segment": s["base_offset"],
                    "position": b["position"],
                    "size": b["size"],
                    "magic": b["magic"],
                    "base_offset": b["base_offset"],
                    "last_offset": b["last_offset"],
                    "max_timestamp": b["max_timestamp"],
                    "crc_valid": b["crc_valid"],
                    "compression": b["compression"],
                    "record_count": b["count"] if b["magic"] >= 2 else len(b["records"]),
                }
            )
            for r in b["records"]:
                expected_records.append(
                    {
                        "type": "record",
                        "offset": r["offset"],
                        "timestamp": r["timestamp"],
                        "key": manifest_kv(r, "key"),
                        "value": manifest_kv(r, "value"),
                    }
                )
    assert batches == expected_batches
    if expected_records:
        assert records == expected_records
    else:
        assert sum(b["record_count"] for b in batches) == len(records)
    oi = [[x["segment"], x["offset"], x["position"]] for x in lines if x["type"] == "offset_index"]
    ti = [[x["segment"], x["timestamp"], x["offset"]] for x in lines if x["type"] == "time_index"]
    assert oi == [[s["base_offset"], e[0], e[1]] for s in m["segments"] for e in s["offset_index"]["entries"]]
    assert ti == [[s["base_offset"], e[0], e[1]] for s in m["segments"] for e in s["time_index"]["entries"]]
    assert {x["type"] for x in lines} <= {"batch", "record", "offset_index", "time_index"}
    if scenario == CRASH:
        assert rc == 1
        assert "00000000000000000000.log" in err and "offset 40346" in err
    else:
        assert (rc, err) == (0, "")


def _lookup_cases(m: dict[str, Any]) -> tuple[list[tuple[int, Any]], list[tuple[int, Any]]]:
    """(offset, expected) and (timestamp, expected) pairs where the log-level answer is the manifest's."""
    segs = m["segments"]
    bases = [s["base_offset"] for s in segs]
    # a segment without timestamps (v0) falls back to the file's mtime in Kafka: always "recent enough"
    largest = [lt if lt >= 0 else float("inf") for lt in (s["time_index"]["last_entry"][0] for s in segs)]
    by_offset, by_ts = [], []
    for i, s in enumerate(segs):
        for q in s["lookups"]["by_offset"]:
            t = q["target_offset"]
            floor = max([j for j, b in enumerate(bases) if b <= t], default=0)
            if floor == i and "error" not in q and (q["translate_offset"] is not None or i == len(segs) - 1):
                by_offset.append((t, q.get("translate_offset")))
        for q in s["lookups"]["by_timestamp"]:
            ts = q["target_timestamp"]
            first = next((j for j, lt in enumerate(largest) if lt >= ts), None)
            if first == i and "error" not in q:
                exp = q["find_offset_by_timestamp"]
                by_ts.append(
                    (ts, None if exp is None else {"timestamp": exp["timestamp"], "offset": exp["offset"]})
                )
    return by_offset[:: max(1, len(by_offset) // 25)], by_ts[:: max(1, len(by_ts) // 25)]


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != CRASH])
def test_lookup_json_matches_manifest(
    scenario: str, kx: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    d = FIXTURES / scenario
    by_offset, by_ts = _lookup_cases(kx.manifest(d))
    assert by_offset and by_ts
    for target, exp in by_offset:
        rc, out, err = run_main(["lookup", str(d), "--offset", str(target), "--json"], capsys)
        assert (rc, err) == (0, "")
        want = exp or {"batch_last_offset": None, "position": None, "batch_size": None}
        assert json.loads(out) == want, target
    for ts, exp in by_ts:
        rc, out, err = run_main(["lookup", str(d), "--timestamp", str(ts), "--json"], capsys)
        assert (rc, err) == (0, "")
        assert json.loads(out) == (exp or {"timestamp": None, "offset": None}), ts


def test_lookup_on_corrupt_data_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    d = FIXTURES / CRASH
    rc, out, err = run_main(["lookup", str(d), "--offset", "252", "--json"], capsys)
    assert rc == 1 and out == ""
    assert "Found record size 0 smaller than minimum record overhead (14)" in err
    assert str(d / "00000000000000000000.log") in err and "offset 40346" in err
    rc, out, err = run_main(["lookup", str(d), "--offset", "251", "--json"], capsys)
    assert rc == 0 and json.loads(out) == {"batch_last_offset": 251, "position": 39855, "batch_size": 491}


def test_usage_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = str(FIXTURES / "kafka/v2_transactions")
    for argv in (
        [],
        ["dump"],
        ["lookup", d],
        ["lookup", d, "--offset", "1", "--timestamp", "2"],
        ["lookup", d, "--offset", "x"],
        ["frobnicate", d],
        ["dump", str(tmp_path / "missing")],
        ["lookup", str(tmp_path / "missing"), "--offset", "1"],
    ):
        rc, _out, err = run_main(argv, capsys)
        assert rc == 2, argv
        assert err


def test_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    d = str(FIXTURES / "kafka/v2_transactions")
    rc, out, _ = run_main(["dump", d], capsys)
    assert rc == 0
    assert (
        "baseOffset: 0 lastOffset: 2" in out and "| offset: 8 timestamp: 1700000000080 key: 00000001" in out
    )
    assert "offset: 7 position: 431" in out and "timestamp: 1700000000071 offset: 7" in out
    rc, out, _ = run_main(["lookup", d, "--offset", "11"], capsys)
    assert rc == 0 and "position 929" in out and "last offset 13" in out
    rc, out, _ = run_main(["lookup", d, "--timestamp", "1700000000100"], capsys)
    assert rc == 0 and "offset 10" in out
    rc, out, _ = run_main(["lookup", d, "--timestamp", "1800000000000"], capsys)
    assert rc == 0 and out.startswith("no record")


def test_dump_reports_bad_crc_and_torn_tail(
    tmp_path: Path, kx: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    d = kx.copy_dir(FIXTURES / "kafka/v2_transactions", tmp_path / "t-0")
    p = d / "00000000000000000000.log"
    data = bytearray(p.read_bytes())
    data[300] ^= 0x40  # inside batch 1 (position 220)
    p.write_bytes(bytes(data[:-5]))
    rc, out, err = run_main(["dump", str(d), "--json"], capsys)
    batches = [json.loads(x) for x in out.splitlines() if '"batch"' in x]
    assert [b["crc_valid"] for b in batches[:3]] == [True, False, True]
    assert len(batches) == 31
    assert rc == 1 and "do not form a complete batch" in err and f"offset {5262}" in err


def test_subprocess_entry_point_both_impls() -> None:
    d = str(FIXTURES / "kafka/v2_compression_codecs")
    outs = []
    for impl in ("pure", "native"):
        p = run_subprocess("dump", d, "--json", impl=impl)
        assert p.returncode == 0, p.stderr
        outs.append(p.stdout)
        p = run_subprocess("lookup", d, "--timestamp", "1700000000100", "--json", impl=impl)
        assert p.returncode == 0 and json.loads(p.stdout) == {"timestamp": 1700000000114, "offset": 11}
    assert outs[0] == outs[1]
    p = run_subprocess("lookup", str(FIXTURES / CRASH), "--offset", "252")
    assert p.returncode == 1 and "offset 40346" in p.stderr
    p = run_subprocess("lookup", d)
    assert p.returncode == 2


def test_register_mounts_under_a_parent_parser(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="rmqcore")
    sub = parser.add_subparsers(dest="command", required=True)
    cli.register(sub)
    d = str(FIXTURES / "kafka/v2_transactions")
    args = parser.parse_args(["kafka", "lookup", d, "--offset", "5", "--json"])
    assert args.func(args) == 0
    assert json.loads(capsys.readouterr().out) == {"batch_last_offset": 5, "position": 220, "batch_size": 211}
    args = parser.parse_args(["kafka", "dump", d])
    assert args.func(args) == 0
    with pytest.raises(SystemExit) as ei:
        parser.parse_args(["kafka"])
    assert ei.value.code == 2


def test_dump_without_the_codec_shows_every_batch_and_asks_for_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A snappy/lz4/zstd batch without cramjam is no corruption: exit 2, one line saying what to
    install; every batch header and every record that decodes is still printed (it was "corrupt
    data", exit 1, one line per batch)."""
    monkeypatch.setitem(sys.modules, "cramjam", None)  # `import cramjam` raises ImportError
    d = FIXTURES / "kafka/v2_compression_codecs"
    rc, out, err = run_main(["dump", str(d), "--json"], capsys)
    lines = [json.loads(x) for x in out.splitlines()]
    batches = [x for x in lines if x["type"] == "batch"]
    assert rc == 2 and len(batches) == 50  # every batch of the manifest
    assert [b["compression"] for b in batches[:5]] == ["none", "gzip", "snappy", "lz4", "zstd"]
    # the records of the batches before the first one that needs cramjam (none, gzip) are there
    first_records = [x["offset"] for x in lines[: lines.index(batches[2])] if x["type"] == "record"]
    assert first_records == list(range(batches[2]["base_offset"]))
    assert err.count("\n") == 1 and err.startswith("rmqcore: error: ")
    assert "install rmqcore[kafka]" in err and "corrupt" not in err
    assert f"offset {batches[2]['position']})" in err and "more problems after it" in err
    rc, out, err = run_main(["lookup", str(d), "--timestamp", "1700000000240"], capsys)  # in the lz4 batch
    assert (rc, out) == (2, "") and err.count("\n") == 1 and "install rmqcore[kafka]" in err


def test_dump_reports_several_problems_in_one_line(
    tmp_path: Path, kx: SimpleNamespace, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch whose records do not parse and a torn tail: the first problem, and how many more
    (it printed one error line for each)."""
    d = kx.copy_dir(FIXTURES / "kafka/v2_transactions", tmp_path / "t-0")
    p = d / "00000000000000000000.log"
    data = bytearray(p.read_bytes())
    data[60] ^= 0x07  # batch 0's record count: its records no longer parse
    p.write_bytes(bytes(data[:-5]))
    rc, out, err = run_main(["dump", str(d)], capsys)
    assert rc == 1 and err.count("\n") == 1
    assert err.startswith("rmqcore: error: corrupt data: Found invalid record structure")
    assert f"({p}, offset 0)" in err
    assert "(and 1 more problem after it)" in err
    assert out.count("batch position: ") == 31


def test_corruption_errors_of_a_segment_name_the_file_and_the_batch(
    tmp_path: Path, kx: SimpleNamespace, impl: SimpleNamespace
) -> None:
    """Records decoded from a segment's batches report the segment file and the batch position (a
    CorruptionError from RecordBatch.records() had path=None)."""
    from rmqcore.errors import CorruptionError
    from rmqcore.kafka.log import KafkaLog

    d = kx.copy_dir(FIXTURES / "kafka/v2_transactions", tmp_path / "t-0")
    p = d / "00000000000000000000.log"
    data = bytearray(p.read_bytes())
    data[220 + 60] ^= 0x07  # the record count of the batch at 220
    p.write_bytes(bytes(data))
    log = KafkaLog(d, impl=impl.name)
    try:
        batches = list(log.segments[0].batches())
        assert batches[1].position == 220
        with pytest.raises(CorruptionError) as ei:
            batches[1].records()
        assert (ei.value.path, ei.value.position) == (str(p), 220) and str(p) in str(ei.value)
        assert batches[1].path == str(p)
        assert len(batches[0].records()) > 0
    finally:
        log.close()
