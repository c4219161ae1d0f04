"""Every field of every manifest in shared/fixtures/kafka and kafka-real-broker, reproduced by reading
the files as they are (read-only, in place), once per kernel implementation."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rmqcore.errors import CorruptionError, IndexCorruptError
from rmqcore.kafka import KafkaLog, LogSegment, SegmentConfig
from rmqcore.kafka.records import Record, RecordBatch
from rmqcore.kafka.txnindex import TransactionIndex

_SHARED = Path(__file__).resolve().parents[3] / "shared"
if not _SHARED.is_dir():  # allow an override, as tests/conftest.py does
    _SHARED = Path(os.environ.get("RMQCORE_SHARED", _SHARED))
FIXTURES = _SHARED / "fixtures"
SCENARIOS = sorted(
    p.parent.relative_to(FIXTURES).as_posix()
    for p in [*FIXTURES.glob("kafka/*/manifest.json"), *FIXTURES.glob("kafka-real-broker/*/manifest.json")]
)


def test_all_scenarios_present() -> None:
    names = {s.split("/")[1] for s in SCENARIOS}
    assert {
        "legacy_v0",
        "legacy_v1",
        "v2_compression_codecs",
        "v2_dense_index_interval0",
        "v2_idempotent_two_segments",
        "v2_large_index_warm_section",
        "v2_log_append_time",
        "v2_multibatch_appends",
        "v2_multibatch_appends_recovered",
        "v2_open_segment_clean_close",
        "v2_open_segment_crash_image",
        "v2_open_segment_recovered",
        "v2_transactions",
        "v2_truncated",
        "pinterest-tiered-storage-timeindex_test",
    } <= names


def _printable(b: bytes) -> bool:
    return all(0x20 <= c < 0x7F for c in b)


def record_as_manifest(r: Record) -> dict[str, Any]:
    d: dict[str, Any] = {"offset": r.offset, "timestamp": r.timestamp, "size_in_bytes": r.size_in_bytes}
    for name, v in (("key", r.key), ("value", r.value)):
        if v is None:
            d[name] = None
        elif _printable(v):
            d[name] = v.decode()
        else:
            d[name + "_hex"] = v.hex()
    if r.headers:
        d["headers"] = [
            {"key": h.key, "value": None if h.value is None else h.value.decode()} for h in r.headers
        ]
    if r.sequence >= 0:
        d["sequence"] = r.sequence
    return d


def batch_as_manifest(b: RecordBatch) -> dict[str, Any]:
    d: dict[str, Any] = {
        "position": b.position,
        "size": b.size,
        "magic": b.magic,
        "base_offset": b.base_offset,
        "last_offset": b.last_offset,
        "crc": b.crc,
        "crc_valid": b.crc_valid,
        "attributes": b.attributes,
        "max_timestamp": b.max_timestamp,
        "compression": b.compression,
        "timestamp_type": b.timestamp_type,
        "is_transactional": b.is_transactional,
        "is_control": b.is_control,
        "partition_leader_epoch": b.partition_leader_epoch,
        "producer_id": b.producer_id,
        "producer_epoch": b.producer_epoch,
        "base_sequence": b.base_sequence,
        "count": b.count,
        "records": [record_as_manifest(r) for r in b.records()],
    }
    if b.magic >= 2:
        d["base_timestamp"] = b.base_timestamp
    return d


def _segments(kx: SimpleNamespace, scenario: str, impl: str) -> list[tuple[dict[str, Any], LogSegment]]:
    d = FIXTURES / scenario
    m = kx.manifest(d)
    cfg = SegmentConfig.from_kafka(m.get("config", {}))
    return [(s, LogSegment.open(d, s["base_offset"], cfg, writable=False, impl=impl)) for s in m["segments"]]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_files_and_batches(scenario: str, impl: SimpleNamespace, kx: SimpleNamespace) -> None:
    for s, seg in _segments(kx, scenario, impl.name):
        with seg:
            d = FIXTURES / scenario
            for name, size in s["files"].items():
                p = d / name
                assert (p.stat().st_size if p.exists() else None) == size, name
            assert seg.size == s["log_size"]
            batches = list(seg.batches(strict=False))
            assert len(batches) == len(s["batches"])
            if isinstance(s["batches"][0], list):  # real-broker compact form
                fmt = kx.manifest(d)["batches_format"]
                assert (
                    fmt == "[position, size, base_offset, last_offset, max_timestamp, crc32c, record_count]"
                )
                got = [
                    [b.position, b.size, b.base_offset, b.last_offset, b.max_timestamp, b.crc, b.count]
                    for b in batches
                ]
                assert got == s["batches"]
                assert all(b.crc_valid for b in batches)
                # and the records decode with the declared count
                assert sum(len(b.records()) for b in batches) == sum(x[6] for x in s["batches"])
            else:
                for b, expected in zip(batches, s["batches"], strict=True):
                    assert batch_as_manifest(b) == expected, (scenario, b.position)
            count, valid, status = impl.kafka_batch.scan(seg.log.view(), 0, seg.size, 1)
            if "valid_bytes_by_crc_scan" in s:
                assert valid == s["valid_bytes_by_crc_scan"]
            if "log_iteration_error" in s:
                assert status == impl.kafka_batch.E_SIZE
                with pytest.raises(CorruptionError) as ei:
                    list(seg.batches())
                assert ei.value.position == valid
                assert "Found record size 0 smaller than minimum record overhead (14)" in str(ei.value)
                assert "CorruptRecordException: Found record size 0 smaller" in s["log_iteration_error"]
            else:
                assert (count, valid, status) == (len(batches), seg.size, impl.kafka_batch.END)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_indexes(scenario: str, impl: SimpleNamespace, kx: SimpleNamespace) -> None:
    for s, seg in _segments(kx, scenario, impl.name):
        with seg:
            base = s["base_offset"]
            oi, ti = s["offset_index"], s["time_index"]
            assert oi["entries_format"] == "[absolute_offset, physical_position, stored_relative_offset]"
            assert ti["entries_format"] == "[timestamp, absolute_offset, stored_relative_offset]"
            assert seg.offset_index.length == oi["file_length"]
            assert seg.offset_index.entries == oi["entries_as_kafka_reads_them"]
            assert seg.offset_index.max_entries == oi["max_entries"]
            assert seg.offset_index.last_offset == oi["last_offset"]
            assert [[e.offset, e.position, e.offset - base] for e in seg.offset_index.entries_list()] == oi[
                "entries"
            ]
            assert [list(seg.offset_index.entry(i)) for i in range(seg.offset_index.entries)] == [
                e[:2] for e in oi["entries"]
            ]
            assert seg.time_index.length == ti["file_length"]
            assert seg.time_index.entries == ti["entries_as_kafka_reads_them"]
            assert seg.time_index.max_entries == ti["max_entries"]
            assert list(seg.time_index.last_entry) == ti["last_entry"]
            assert [[e.timestamp, e.offset, e.offset - base] for e in seg.time_index.entries_list()] == ti[
                "entries"
            ]
            for check, index in (
                (oi["sanity_check"], seg.offset_index),
                (ti["sanity_check"], seg.time_index),
            ):
                if check == "ok":
                    index.sanity_check()
                else:
                    assert check.startswith("CorruptIndexException: ")
                    with pytest.raises(IndexCorruptError) as ei:
                        index.sanity_check()
                    assert ei.value.detail == check[len("CorruptIndexException: ") :]
                    assert ei.value.path == str(index.path)
            if "txn_index" in s:
                txn = TransactionIndex(FIXTURES / scenario / f"{base:020d}.txnindex", base, writable=False)
                got = [
                    {
                        "version": t.version,
                        "producer_id": t.producer_id,
                        "first_offset": t.first_offset,
                        "last_offset": t.last_offset,
                        "last_stable_offset": t.last_stable_offset,
                    }
                    for t in txn.all_aborted_txns()
                ]
                assert got == s["txn_index"]
                txn.sanity_check()


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lookups_by_offset(scenario: str, impl: SimpleNamespace, kx: SimpleNamespace) -> None:
    n = 0
    for s, seg in _segments(kx, scenario, impl.name):
        with seg:
            lk = s["lookups"]
            for q in lk["by_offset"]:
                target = q["target_offset"]
                assert list(seg.offset_index.lookup(target)) == q["offset_index_lookup"], q
                if "error" in q:
                    assert q["error"].startswith("CorruptRecordException: Found record size 0")
                    with pytest.raises(CorruptionError) as ei:
                        seg.translate_offset(target)
                    assert ei.value.path == str(seg.log.path)
                    assert ei.value.position == s["valid_bytes_by_crc_scan"]
                    continue
                t = seg.translate_offset(target)
                got = (
                    None
                    if t is None
                    else {"batch_last_offset": t.offset, "position": t.position, "batch_size": t.size}
                )
                assert got == q["translate_offset"], q
                if "fetch_upper_bound_offset" in q:
                    assert t is not None
                    fu = seg.offset_index.fetch_upper_bound_offset(
                        t.position, lk["fetch_size_for_upper_bound"]
                    )
                    assert (None if fu is None else fu.offset) == q["fetch_upper_bound_offset"], q
                n += 1
    assert n > 0


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_lookups_by_timestamp(scenario: str, impl: SimpleNamespace, kx: SimpleNamespace) -> None:
    n = 0
    for s, seg in _segments(kx, scenario, impl.name):
        with seg:
            for q in s["lookups"]["by_timestamp"]:
                ts, start = q["target_timestamp"], q["starting_offset"]
                entry = seg.time_index.lookup(ts)
                assert list(entry) == q["time_index_lookup"], q
                assert seg.offset_index.lookup(max(entry.offset, start)).position == q["scan_start_position"]
                if "error" in q:
                    with pytest.raises(CorruptionError) as ei:
                        seg.find_offset_by_timestamp(ts, start)
                    assert ei.value.path == str(seg.log.path)
                    continue
                r = seg.find_offset_by_timestamp(ts, start)
                got = (
                    None
                    if r is None
                    else {"timestamp": r.timestamp, "offset": r.offset, "leader_epoch": r.leader_epoch}
                )
                assert got == q["find_offset_by_timestamp"], q
                n += 1
    assert n > 0


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_log_level_lookups(scenario: str, impl: SimpleNamespace, kx: SimpleNamespace) -> None:
    """The directory opened as one log answers as its segments do (floor segment / first segment whose
    largest timestamp reaches the target)."""
    d = FIXTURES / scenario
    m = kx.manifest(d)
    with KafkaLog(d, impl=impl.name) as log:
        segs = m["segments"]
        assert [s.base_offset for s in log.segments] == [s["base_offset"] for s in segs]
        assert log.log_start_offset == segs[0]["base_offset"]
        for i, s in enumerate(segs):
            for q in s["lookups"]["by_offset"]:
                if "error" in q:
                    continue
                target = q["target_offset"]
                floor = log.segment_for(target)
                found = log.translate_offset(target)
                if (
                    q["translate_offset"] is not None
                    and floor is not None
                    and floor.base_offset == s["base_offset"]
                ):
                    assert found is not None and found[0].base_offset == s["base_offset"]
                    assert list(found[1]) == [
                        q["translate_offset"][k] for k in ("batch_last_offset", "position", "batch_size")
                    ]
            largest = [x["time_index"]["last_entry"][0] for x in segs]
            for q in s["lookups"]["by_timestamp"]:
                if "error" in q or largest[i] < 0:
                    continue
                ts = q["target_timestamp"]
                first = next(j for j, lt in enumerate(largest) if lt >= ts) if max(largest) >= ts else None
                r = log.find_offset_by_timestamp(ts)
                if first is None:
                    assert r is None
                elif first == i:
                    exp = q["find_offset_by_timestamp"]
                    assert (None if r is None else [r.timestamp, r.offset]) == (
                        None if exp is None else [exp["timestamp"], exp["offset"]]
                    )
