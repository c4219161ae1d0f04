"""Writing: replayed appends give Kafka's files byte for byte; recovery and truncation reproduce the
oracle's after-state; the index and segment operations behave as Kafka's."""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rmqcore import fileops
from rmqcore.errors import (
    ConfigError,
    CorruptionError,
    DiskFullError,
    IndexCorruptError,
    InvalidMessageError,
    OffsetOutOfRangeError,
    SegmentFullError,
    StoreClosedError,
)
from rmqcore.kafka import (
    InvalidOffsetError,
    KafkaLog,
    LogSegment,
    OffsetIndex,
    Record,
    SegmentConfig,
    TimeIndex,
    encode_batch,
)
from rmqcore.kafka.records import DefaultRecordBatch, Header
from rmqcore.kafka.txnindex import AbortedTxn, TransactionIndex
from tests.faults import FullAllocations

_SHARED = Path(__file__).resolve().parents[3] / "shared"
if not _SHARED.is_dir():  # allow an override, as tests/conftest.py does
    _SHARED = Path(os.environ.get("RMQCORE_SHARED", _SHARED))
FIXTURES = _SHARED / "fixtures"
KAFKA = FIXTURES / "kafka"
REAL = FIXTURES / "kafka-real-broker" / "pinterest-tiered-storage-timeindex_test"
APPEND_SCENARIOS = sorted(
    p.parent.name
    for p in KAFKA.glob("*/manifest.json")
    if "appends" in __import__("json").loads(p.read_text())["segments"][0]
)


def test_append_scenarios_found() -> None:
    assert len(APPEND_SCENARIOS) >= 10


# --- replaying Kafka's append calls --------------------------------------------------------------


@pytest.mark.parametrize("scenario", APPEND_SCENARIOS)
def test_replayed_appends_give_kafkas_files(
    scenario: str, impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path
) -> None:
    """Same append calls (per-append indexing, as the oracle's Kafka) -> byte-identical files,
    and the same decision to add index entries on every call."""
    m = kx.manifest(KAFKA / scenario)
    crash_image = scenario == "v2_open_segment_crash_image"
    for s in m["segments"]:
        base = s["base_offset"]
        cfg = SegmentConfig.from_kafka(m["config"], per_batch_index=False)
        seg = LogSegment.open(tmp_path, base, cfg, impl=impl.name)
        src = (KAFKA / scenario / f"{base:020d}.log").read_bytes()
        for a in s["appends"]:
            chunk = src[a["position"] : a["position"] + a["size"]]
            r = seg.append(
                chunk, a["largest_offset"], a["largest_timestamp"], a["shallow_offset_of_max_timestamp"]
            )
            assert (r.position, r.size) == (a["position"], a["size"])
            assert r.offset_index_entry_added == a["offset_index_entry_added"], a
            assert r.time_index_entry_added == a["time_index_entry_added"], a
            assert len(seg.batch_headers(a["position"])[0]) >= a["batches"]
        if crash_image:  # the files of a live segment, copied without close()
            seg.flush()
            got = kx.segment_files(tmp_path, base)
            seg.close_handlers()
        else:
            seg.close()
            got = kx.segment_files(tmp_path, base)
        exp = kx.segment_files(KAFKA / scenario, base)
        exp[".txnindex"] = got[".txnindex"] = None  # the txn index comes from producer state, not appends
        for suffix in exp:
            assert got[suffix] == exp[suffix], (scenario, base, suffix)


@pytest.mark.parametrize("scenario", APPEND_SCENARIOS)
def test_append_defaults_are_log_validators(scenario: str, kx: SimpleNamespace, tmp_path: Path) -> None:
    """Without the three values, append derives them from the batches as Kafka's LogValidator does."""
    m = kx.manifest(KAFKA / scenario)
    s = m["segments"][0]
    seg = LogSegment.open(
        tmp_path, s["base_offset"], SegmentConfig.from_kafka(m["config"], per_batch_index=False)
    )
    src = (KAFKA / scenario / f"{s['base_offset']:020d}.log").read_bytes()
    for a in s["appends"]:
        r = seg.append(src[a["position"] : a["position"] + a["size"]])
        assert (r.offset_index_entry_added, r.time_index_entry_added) == (
            a["offset_index_entry_added"],
            a["time_index_entry_added"],
        )
    assert seg.max_timestamp_so_far == max(x["largest_timestamp"] for x in s["appends"])
    seg.close()
    got, exp = (
        kx.segment_files(tmp_path, s["base_offset"]),
        kx.segment_files(KAFKA / scenario, s["base_offset"]),
    )
    if scenario != "v2_open_segment_crash_image":
        assert (got[".index"], got[".timeindex"]) == (exp[".index"], exp[".timeindex"])


def test_crash_image_then_close_equals_clean_close(
    impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path
) -> None:
    m = kx.manifest(KAFKA / "v2_open_segment_crash_image")
    s = m["segments"][0]
    seg = LogSegment.open(
        tmp_path, 0, SegmentConfig.from_kafka(m["config"], per_batch_index=False), impl=impl.name
    )
    src = (KAFKA / "v2_open_segment_crash_image" / "00000000000000000000.log").read_bytes()
    for a in s["appends"]:
        seg.append(src[a["position"] : a["position"] + a["size"]])
    assert seg.log.path.stat().st_size == 98304  # preallocated
    seg.close()
    assert kx.segment_files(tmp_path, 0) == kx.segment_files(KAFKA / "v2_open_segment_clean_close", 0)


def test_per_batch_indexing_equals_recovery(
    impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path
) -> None:
    """KAFKA-806 indexing (the default) on the multi-batch appends gives what recover() writes."""
    m = kx.manifest(KAFKA / "v2_multibatch_appends")
    seg = LogSegment.open(tmp_path, 0, SegmentConfig.from_kafka(m["config"]), impl=impl.name)
    src = (KAFKA / "v2_multibatch_appends" / "00000000000000000000.log").read_bytes()
    for a in m["segments"][0]["appends"]:
        seg.append(src[a["position"] : a["position"] + a["size"]])
    seg.close()
    assert kx.segment_files(tmp_path, 0) == kx.segment_files(KAFKA / "v2_multibatch_appends_recovered", 0)


def test_warm_section_scenario_replay(impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path) -> None:
    """2500 single-batch appends (the manifest lists batches, not appends) -> the 2499-entry index."""
    m = kx.manifest(KAFKA / "v2_large_index_warm_section")
    seg = LogSegment.open(tmp_path, 0, SegmentConfig.from_kafka(m["config"]), impl=impl.name)
    src = (KAFKA / "v2_large_index_warm_section" / "00000000000000000000.log").read_bytes()
    for b in m["segments"][0]["batches"]:
        seg.append(src[b["position"] : b["position"] + b["size"]])
    seg.close()
    assert kx.segment_files(tmp_path, 0) == kx.segment_files(KAFKA / "v2_large_index_warm_section", 0)


def test_real_broker_replay(impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path) -> None:
    """A real broker's rolled segments: one append per single-record batch, interval 4096."""
    m = kx.manifest(REAL)
    for s in m["segments"]:
        base = s["base_offset"]
        seg = LogSegment.open(tmp_path, base, SegmentConfig(index_interval_bytes=4096), impl=impl.name)
        src = (REAL / f"{base:020d}.log").read_bytes()
        for pos, size, *_ in s["batches"]:
            seg.append(src[pos : pos + size])
        seg.on_become_inactive_segment()
        seg.close()
        assert kx.segment_files(tmp_path, base) == kx.segment_files(REAL, base)


# --- recovery and truncation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "src,dst",
    [
        ("v2_open_segment_crash_image", "v2_open_segment_recovered"),
        ("v2_multibatch_appends", "v2_multibatch_appends_recovered"),
    ],
)
def test_recover_gives_recovered_scenario(
    src: str, dst: str, impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path
) -> None:
    m = kx.manifest(KAFKA / dst)
    d = kx.copy_dir(KAFKA / src, tmp_path / src)
    seg = LogSegment.open(d, 0, SegmentConfig.from_kafka(m["config"]), impl=impl.name)
    assert seg.recover() == m["recover_truncated_bytes"]
    seg.close()
    assert kx.segment_files(d, 0) == kx.segment_files(KAFKA / dst, 0)


def test_recover_crash_image_through_log(impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path) -> None:
    m = kx.manifest(KAFKA / "v2_open_segment_recovered")
    d = kx.copy_dir(KAFKA / "v2_open_segment_crash_image", tmp_path / "p-0")
    with KafkaLog(
        d, SegmentConfig.from_kafka(m["config"]), writable=True, recover=True, impl=impl.name
    ) as log:
        assert log.recovered_bytes == {0: 57958}
        assert log.log_end_offset == 252
        # the active segment's indexes are re-expanded for appends, as LogLoader does
        assert log.active_segment.offset_index.length == 1024
    assert kx.segment_files(d, 0) == kx.segment_files(KAFKA / "v2_open_segment_recovered", 0)


def test_recover_is_idempotent_on_clean_segments(
    impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path
) -> None:
    for scenario in ("v2_transactions", "legacy_v1", "v2_compression_codecs", "v2_open_segment_clean_close"):
        m = kx.manifest(KAFKA / scenario)
        d = kx.copy_dir(KAFKA / scenario, tmp_path / scenario)
        seg = LogSegment.open(d, 0, SegmentConfig.from_kafka(m["config"]), impl=impl.name)
        assert seg.recover() == 0
        seg.close()
        got, exp = kx.segment_files(d, 0), kx.segment_files(KAFKA / scenario, 0)
        assert got[".log"] == exp[".log"] and got[".txnindex"] == exp[".txnindex"]
        if all(a["batches"] == 1 for a in m["segments"][0]["appends"]):
            assert got == exp  # single-batch appends: recovery indexes == append-time indexes


def test_recover_truncates_at_bad_crc_and_drops_later_segments(
    impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path
) -> None:
    d = kx.copy_dir(KAFKA / "v2_idempotent_two_segments", tmp_path / "p-0")
    m = kx.manifest(KAFKA / "v2_idempotent_two_segments")
    victim = m["segments"][0]["batches"][100]
    log_path = d / "00000000000000000000.log"
    data = bytearray(log_path.read_bytes())
    data[victim["position"] + 70] ^= 0x01  # inside the records: only the CRC notices
    log_path.write_bytes(bytes(data))
    with KafkaLog(
        d, SegmentConfig.from_kafka(m["config"]), writable=True, recover=True, impl=impl.name
    ) as log:
        assert log.recovered_bytes[0] == len(data) - victim["position"]
        assert [s.base_offset for s in log.segments] == [0]
        assert log.log_end_offset == victim["base_offset"]
    assert not (d / "00000000000000001527.log").exists()
    assert log_path.stat().st_size == victim["position"]


def test_missing_index_is_rebuilt_on_writable_open(
    impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path
) -> None:
    d = kx.copy_dir(KAFKA / "v2_transactions", tmp_path / "t-0")
    (d / "00000000000000000000.index").unlink()
    (d / "00000000000000000000.timeindex").unlink()
    m = kx.manifest(KAFKA / "v2_transactions")
    with KafkaLog(d, SegmentConfig.from_kafka(m["config"]), writable=True, impl=impl.name) as log:
        assert log.recovered_bytes == {0: 0}
    assert kx.segment_files(d, 0) == kx.segment_files(KAFKA / "v2_transactions", 0)


def test_truncate_to_gives_truncated_scenario(
    impl: SimpleNamespace, kx: SimpleNamespace, tmp_path: Path
) -> None:
    m = kx.manifest(KAFKA / "v2_truncated")
    d = kx.copy_dir(KAFKA / "v2_idempotent_two_segments", tmp_path / "p-0")
    seg = LogSegment.open(d, 0, SegmentConfig.from_kafka(m["config"]), impl=impl.name)
    assert seg.truncate_to(m["truncate_to_offset"]) == m["bytes_truncated"]
    assert seg.read_next_offset() == m["next_offset_after"]
    seg.close()
    assert kx.segment_files(d, 0) == kx.segment_files(KAFKA / "v2_truncated", 0)


def test_read_next_offset(impl: SimpleNamespace, kx: SimpleNamespace) -> None:
    for scenario in ("v2_transactions", "v2_idempotent_two_segments", "legacy_v0", "v2_truncated"):
        m = kx.manifest(KAFKA / scenario)
        for s in m["segments"]:
            with LogSegment.open(KAFKA / scenario, s["base_offset"], writable=False, impl=impl.name) as seg:
                assert seg.read_next_offset() == s["batches"][-1]["last_offset"] + 1


# --- encoding ------------------------------------------------------------------------------------


def _header_kwargs(b: DefaultRecordBatch) -> dict[str, object]:
    return dict(
        base_offset=b.base_offset,
        compression_type=b.compression,
        partition_leader_epoch=b.partition_leader_epoch,
        producer_id=b.producer_id,
        producer_epoch=b.producer_epoch,
        base_sequence=b.base_sequence,
        is_transactional=b.is_transactional,
        is_control=b.is_control,
        last_offset_delta=b.last_offset_delta,
    )


@pytest.mark.parametrize(
    "scenario",
    ["v2_transactions", "v2_idempotent_two_segments", "v2_compression_codecs", "v2_dense_index_interval0"],
)
def test_encode_batch_reproduces_kafka_bytes(scenario: str, impl: SimpleNamespace) -> None:
    """Uncompressed CreateTime batches re-encoded from their decoded records are byte-identical."""
    with LogSegment.open(KAFKA / scenario, 0, writable=False, impl=impl.name) as seg:
        n = 0
        for b in seg.batches():
            assert isinstance(b, DefaultRecordBatch)
            recs = b.records()
            if b.compression != "none":
                again = encode_batch(recs, **_header_kwargs(b), impl=impl.name)  # type: ignore[arg-type]
                back = DefaultRecordBatch(again, 0, impl.name)
                assert back.crc_valid and back.records() == recs
                continue
            assert encode_batch(recs, **_header_kwargs(b), impl=impl.name) == b.data  # type: ignore[arg-type]
            n += 1
        assert n > 0


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_encode_roundtrip_codecs(codec: str, impl: SimpleNamespace) -> None:
    recs = [
        Record(
            100 + i,
            1_700_000_000_000 + 7 * i,
            None if i % 3 == 0 else b"k%d" % i,
            b"v" * (i * 50),
            (Header("h", b"x"), Header("n", None)),
        )
        for i in range(40)
    ]
    data = encode_batch(
        recs,
        base_offset=100,
        compression_type=codec,
        producer_id=7,
        producer_epoch=1,
        base_sequence=5,
        impl=impl.name,
    )
    b = DefaultRecordBatch(data, 0, impl.name)
    b.ensure_valid()
    assert b.compression == codec and b.count == 40 and b.last_offset == 139
    got = b.records()
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs
    ]
    assert [r.sequence for r in got] == list(range(5, 45))
    log_append = encode_batch(
        recs[:3], base_offset=100, timestamp_type="LogAppendTime", log_append_time=42, compression_type=codec
    )
    assert {r.timestamp for r in DefaultRecordBatch(log_append).records()} == {42}


def test_encode_rejects_bad_input() -> None:
    with pytest.raises(InvalidMessageError):
        encode_batch([Record(5, 0, None, b"")], base_offset=6)
    with pytest.raises(InvalidMessageError):
        encode_batch([Record(1, 0, None, b""), Record(1, 0, None, b"")], base_offset=0)
    with pytest.raises(InvalidMessageError):
        encode_batch([Record(0, 0, None, b"")], timestamp_type="LogAppendTime")
    with pytest.raises(ValueError):
        encode_batch([Record(0, 0, None, b"")], compression_type="brotli")
    with pytest.raises(InvalidMessageError):
        encode_batch([Record(0, 0, None, b"")], base_sequence=1 << 31)


# --- index behaviour -----------------------------------------------------------------------------


def test_new_index_is_preallocated_and_reopen_counts_every_slot(
    impl: SimpleNamespace, tmp_path: Path
) -> None:
    p = tmp_path / "00000000000000000100.index"
    oi = OffsetIndex(p, 100, 1000, impl=impl.name)
    assert (oi.length, oi.entries, oi.max_entries) == (1000, 0, 125)
    for i in range(10):
        oi.append(100 + i * 3, i * 50)
    oi.flush()
    oi.close_handler()  # crash: not trimmed
    again = OffsetIndex(p, 100, 1000, impl=impl.name)
    assert (again.entries, again.max_entries, again.is_full()) == (125, 125, True)
    assert again.last_offset == 100  # a zero slot: relative 0
    again.sanity_check()  # a zero tail passes the offset-index check since KAFKA-7076
    again.truncate_to(100 + 9 * 3 + 1)  # largest lower bound in a zero-tailed index is Kafka's answer
    again.close_handler()
    t = TimeIndex(tmp_path / "x.timeindex", 0, 120, impl=impl.name)
    assert (t.max_entries, t.entries) == (10, 0)
    for i in range(9):
        assert t.maybe_append(1000 + i, i)
    assert t.is_full()
    with pytest.raises(SegmentFullError):
        t.maybe_append(5000, 20)
    assert t.maybe_append(5000, 20, skip_full_check=True)  # the reserved slot
    with pytest.raises(SegmentFullError):
        t.maybe_append(6000, 21, skip_full_check=True)
    t.close_handler()
    reopened = TimeIndex(tmp_path / "x.timeindex", 0, 120, writable=False, impl=impl.name)
    assert reopened.last_entry == (5000, 20)
    reopened.sanity_check()
    reopened.close()


def test_index_space_is_allocated_and_a_full_disk_is_a_clear_error(impl: SimpleNamespace, tmp_path: Path) -> None:
    """Kafka leaves a new index sparse; written through a map, an unallocated page on a full disk
    is a SIGBUS that kills the process. rmqcore allocates what the map will write, and a full disk
    is a DiskFullError that leaves no file and keeps an open index as it was."""
    p = tmp_path / "00000000000000000100.index"
    ops = FullAllocations()
    with fileops.use(ops):
        oi = OffsetIndex(p, 100, 64 * 1024, impl=impl.name)
        assert os.stat(p).st_blocks * 512 >= 64 * 1024  # allocated, not sparse
        for i in range(10):
            oi.append(100 + i * 3, i * 50)
        oi.trim_to_valid_size()
        assert oi.length == 80
        ops.full = True
        with pytest.raises(DiskFullError):
            OffsetIndex(tmp_path / "00000000000000000200.index", 200, 1024, impl=impl.name)
        assert not (tmp_path / "00000000000000000200.index").exists()
        with pytest.raises(DiskFullError):
            oi.resize(64 * 1024)  # growing the active index again (a reopened active segment)
        assert (oi.length, oi.entries, os.path.getsize(p)) == (80, 10, 80)
        assert oi.lookup(110) == (109, 150)
        ops.full = False
        assert oi.resize(64 * 1024) and oi.length == 64 * 1024
        oi.append(200, 600)
        assert oi.lookup(250) == (200, 600)
        oi.close()


@pytest.mark.parametrize("preallocate", [False, True])
def test_an_append_cut_short_by_a_full_disk_leaves_the_log_as_it_was(
    impl: SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, preallocate: bool
) -> None:
    """pwrite may write part of a batch and then fail with ENOSPC: the error is a DiskFullError,
    the bytes it wrote are taken back (cut, or zeroed inside the preallocated length), and the
    segment appends and reads on once there is space."""
    cfg = SegmentConfig(index_interval_bytes=1, preallocate=preallocate, init_file_size=1 << 16)
    seg = LogSegment.open(tmp_path, 0, cfg, impl=impl.name)
    first = encode_batch([Record(0, 1000, b"k0", b"v" * 100)], base_offset=0, impl=impl.name)
    second = encode_batch([Record(1, 1001, b"k1", b"w" * 300)], base_offset=1, impl=impl.name)
    seg.append(first)
    log_path = tmp_path / "00000000000000000000.log"
    before = log_path.read_bytes()
    real_pwrite, calls = os.pwrite, []

    def short_then_full(fd: int, data: Any, offset: int) -> int:
        calls.append(offset)
        if len(calls) == 1:
            return real_pwrite(fd, bytes(data)[:100], offset)  # a short write...
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")  # ...then the disk is full
        return real_pwrite(fd, data, offset)  # (zeroing blocks that are allocated by now)

    monkeypatch.setattr(os, "pwrite", short_then_full)
    with pytest.raises(DiskFullError):
        seg.append(second)
    monkeypatch.undo()
    assert calls[:2] == [len(first), len(first) + 100]
    assert log_path.read_bytes() == before and seg.log.size == len(first)
    seg.append(second)
    assert [r.key for b in seg.batches() for r in b.records()] == [b"k0", b"k1"]
    seg.close()
    assert log_path.read_bytes()[: len(first) + len(second)] == first + second


def test_zero_tail_time_index_is_corrupt(impl: SimpleNamespace, tmp_path: Path) -> None:
    t = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 120, impl=impl.name)
    t.maybe_append(1700000000000, 3)
    t.close_handler()
    again = TimeIndex(tmp_path / "00000000000000000000.timeindex", 0, 120, impl=impl.name)
    with pytest.raises(
        IndexCorruptError, match="last timestamp is 0 which is less than the first timestamp 1700000000000"
    ) as ei:
        again.sanity_check()
    assert ei.value.position == 9 * 12 and ei.value.path.endswith(".timeindex")
    again.close_handler()
    (tmp_path / "bad.index").write_bytes(b"\x00" * 13)
    bad = OffsetIndex(tmp_path / "bad.index", 0, 1024, writable=False, impl=impl.name)
    assert (bad.entries, bad.max_entries) == (1, 1)
    with pytest.raises(IndexCorruptError, match="found 13 bytes"):
        bad.sanity_check()
    bad.close()
    (tmp_path / "neg.index").write_bytes(struct.pack(">ii", 5, 0) + struct.pack(">ii", -1, 0))
    neg = OffsetIndex(tmp_path / "neg.index", 10, writable=False, impl=impl.name)
    with pytest.raises(IndexCorruptError, match="last offset is 9 which is less than the base offset 10"):
        neg.sanity_check()
    neg.close()


def test_offset_index_truncate_to_three_cases(impl: SimpleNamespace, tmp_path: Path) -> None:
    oi = OffsetIndex(tmp_path / "a.index", 50, 4096, impl=impl.name)
    for off in (55, 60, 70, 80):
        oi.append(off, off * 10)
    oi.truncate_to(70)  # exact entry: dropped with everything after
    assert [e.offset for e in oi.entries_list()] == [55, 60] and oi.last_offset == 60
    oi.truncate_to(58)  # between entries: keep the floor
    assert [e.offset for e in oi.entries_list()] == [55]
    oi.truncate_to(10)  # below every entry: empty
    assert oi.entries == 0 and oi.last_offset == 50
    oi.append(51, 0)
    with pytest.raises(InvalidOffsetError):
        oi.append(51, 10)
    with pytest.raises(OffsetOutOfRangeError):
        oi.append(50 + (1 << 31), 10)
    oi.close()
    assert (tmp_path / "a.index").stat().st_size == 8
    t = TimeIndex(tmp_path / "a.timeindex", 50, 4096, impl=impl.name)
    for i, off in enumerate((55, 60, 70)):
        t.maybe_append(100 + i, off)
    assert not t.maybe_append(102, 71)  # not above the last timestamp: ignored
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(200, 69)
    with pytest.raises(InvalidOffsetError):
        t.maybe_append(50, 90)
    t.truncate_to(60)
    assert t.entries_list() == [(100, 55)] and t.last_entry == (100, 55)
    t.truncate_to(0)
    assert t.last_entry == (-1, 50)
    t.close()


def test_resize_reset_trim(impl: SimpleNamespace, tmp_path: Path) -> None:
    oi = OffsetIndex(tmp_path / "r.index", 0, 80, impl=impl.name)
    for i in range(5):
        oi.append(i + 1, i)
    assert oi.resize(80) is False
    oi.trim_to_valid_size()
    assert (oi.length, oi.entries, oi.max_entries, oi.is_full()) == (40, 5, 5, True)
    with pytest.raises(ValueError):
        oi.resize(32)
    assert oi.resize(203)  # rounded down to 200, zero-extended
    assert (oi.length, oi.max_entries, oi.lookup(3)) == (200, 25, (3, 2))
    oi.reset()
    assert (oi.entries, oi.length, oi.last_offset) == (0, 80, 0)
    oi.close()
    oi.close()  # idempotent
    with pytest.raises(StoreClosedError):
        oi.lookup(1)
    with pytest.raises(ConfigError):
        OffsetIndex(tmp_path / "tiny.index", 0, 7, impl=impl.name)
    ro = OffsetIndex(tmp_path / "r.index", 0, writable=False, impl=impl.name)
    with pytest.raises(PermissionError):
        ro.append(9, 9)
    ro.close()
    missing = OffsetIndex(tmp_path / "absent.index", 0, writable=False, impl=impl.name)
    assert (missing.entries, missing.lookup(5)) == (0, (0, 0))
    missing.close()


def test_fetch_upper_bound_offset(impl: SimpleNamespace, tmp_path: Path) -> None:
    oi = OffsetIndex(tmp_path / "f.index", 0, 4096, impl=impl.name)
    for i in range(10):
        oi.append(i * 10 + 9, i * 100)
    assert oi.fetch_upper_bound_offset(0, 250) == (39, 300)
    assert oi.fetch_upper_bound_offset(100, 200) == (39, 300)  # equal counts as the upper bound
    assert oi.fetch_upper_bound_offset(900, 1) is None
    oi.close()


# --- segments and logs ---------------------------------------------------------------------------


def _batches(base: int, n: int, per: int = 3, ts0: int = 1_700_000_000_000) -> list[bytes]:
    out = []
    off = base
    for _ in range(n):
        recs = [Record(off + j, ts0 + 10 * (off + j), b"k", b"v%d" % (off + j) * 20) for j in range(per)]
        out.append(
            encode_batch(recs, base_offset=off, producer_id=1, producer_epoch=0, base_sequence=off % 1000)
        )
        off += per
    return out


def test_segment_append_validation(impl: SimpleNamespace, tmp_path: Path) -> None:
    seg = LogSegment.open(tmp_path, 0, SegmentConfig(index_interval_bytes=100), impl=impl.name)
    b = _batches(0, 2)
    assert seg.append(b"").size == 0
    bad = bytearray(b[0])
    bad[-1] ^= 1
    with pytest.raises(CorruptionError):
        seg.append(bytes(bad))
    with pytest.raises(CorruptionError):
        seg.append(b[0][:-3])
    seg.append(b[0])
    with pytest.raises(OffsetOutOfRangeError):
        seg.append(_batches(1 << 31, 1)[0])
    assert seg.size == len(b[0])
    seg.close()


def test_log_append_rolls_and_looks_up_across_segments(impl: SimpleNamespace, tmp_path: Path) -> None:
    cfg = SegmentConfig(index_interval_bytes=200, segment_bytes=2000, segment_index_bytes=4096)
    d = tmp_path / "topic-0"
    batches = _batches(0, 60)
    with KafkaLog(d, cfg, writable=True, impl=impl.name) as log:
        for b in batches:
            log.append(b)
        with pytest.raises(InvalidMessageError):
            log.append(batches[0])
        assert len(log.segments) > 3
        assert log.log_end_offset == 180
        bases = [s.base_offset for s in log.segments]
    with KafkaLog(d, cfg, impl=impl.name) as log:
        assert [s.base_offset for s in log.segments] == bases
        for target in (0, 1, 2, 3, 50, 121, 179):
            seg, t = log.translate_offset(target)  # type: ignore[misc]
            assert t.offset >= target and t.offset - 2 <= target
            assert seg.base_offset <= target
        assert log.translate_offset(180) is None
        for target in (0, 55, 179):
            r = log.find_offset_by_timestamp(1_700_000_000_000 + 10 * target)
            assert r is not None and r.offset == target and r.leader_epoch is None
        assert log.find_offset_by_timestamp(1_700_000_000_000 + 10 * 180) is None
        assert sum(1 for _ in log.batches()) == 60
    # every closed segment's indexes equal what recovery rebuilds (per-batch indexing)
    for base in bases:
        files = {s: (d / f"{base:020d}{s}").read_bytes() for s in (".log", ".index", ".timeindex")}
        seg = LogSegment.open(d, base, cfg, impl=impl.name)
        seg.recover()
        seg.close()
        assert {s: (d / f"{base:020d}{s}").read_bytes() for s in files} == files


def test_txn_index_append_on_a_full_disk_leaves_no_partial_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = TransactionIndex(tmp_path / "0.txnindex", 0)
    t.append(AbortedTxn(1, 5, 9, 5))
    before = (tmp_path / "0.txnindex").read_bytes()
    real_write, calls = os.write, []

    def short_then_full(fd: int, data: Any) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data)[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_full)
    with pytest.raises(DiskFullError):
        t.append(AbortedTxn(2, 7, 12, 7))
    monkeypatch.undo()
    assert calls == [len(before), len(before) - 10]
    assert (tmp_path / "0.txnindex").read_bytes() == before
    assert t.all_aborted_txns() == [AbortedTxn(1, 5, 9, 5)]
    t.append(AbortedTxn(2, 7, 12, 7))  # the same entry goes in once there is space
    assert t.all_aborted_txns() == [AbortedTxn(1, 5, 9, 5), AbortedTxn(2, 7, 12, 7)]


def test_txn_index_roundtrip(tmp_path: Path) -> None:
    t = TransactionIndex(tmp_path / "0.txnindex", 0)
    assert t.all_aborted_txns() == []
    t.append(AbortedTxn(1, 5, 9, 5))
    t.append(AbortedTxn(2, 7, 12, 7))
    with pytest.raises(InvalidOffsetError):
        t.append(AbortedTxn(3, 1, 12, 1))
    assert t.collect_aborted_txns(10, 100).aborted_transactions == [AbortedTxn(2, 7, 12, 7)]
    assert t.collect_aborted_txns(0, 6) == ([AbortedTxn(1, 5, 9, 5)], True)
    t.truncate_to(12)
    assert t.all_aborted_txns() == [AbortedTxn(1, 5, 9, 5)]
    (tmp_path / "0.txnindex").write_bytes(b"\x00" * 35)
    with pytest.raises(IndexCorruptError):
        t.all_aborted_txns()
    t.reset()
    assert os.path.getsize(tmp_path / "0.txnindex") == 0
