"""spark.read.format("kafka-segments") against Kafka-written segments (shared/fixtures/kafka)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.datasource import GreaterThanOrEqual, LessThan  # noqa: E402

from rmqcore.spark import read_kafka_segments  # noqa: E402
from rmqcore.spark.kafka_source import KafkaSegmentsReader  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402

KAFKA = FIXTURES / "kafka"
SCENARIOS = sorted(p.name for p in KAFKA.iterdir() if (p / "manifest.json").is_file())


def _bytes(rec: dict, name: str) -> bytes | None:
    if f"{name}_hex" in rec:
        return bytes.fromhex(rec[f"{name}_hex"])
    v = rec.get(name)
    return None if v is None else v.encode()


def _manifest_rows(scenario: str) -> list[tuple]:
    """(segment, offset, timestamp, key, value, headers, batch_position) of every record Kafka read.

    The crash image's segment has a zero-filled preallocated tail where Kafka's reader stops with an
    error (log_iteration_error); its manifest lists the records before it, which is the valid part
    this reader returns too."""
    m = json.loads((KAFKA / scenario / "manifest.json").read_text())
    out = []
    for seg in m["segments"]:
        base = int(seg.get("base_offset", seg["batches"][0]["base_offset"] if seg["batches"] else 0))
        for b in seg["batches"]:
            for r in b["records"]:
                headers = {h["key"]: _bytes(h, "value") for h in r.get("headers", [])}
                out.append(
                    (
                        base,
                        r["offset"],
                        r["timestamp"],
                        _bytes(r, "key"),
                        _bytes(r, "value"),
                        headers,
                        b["position"],
                    )
                )
    return out


@pytest.fixture(scope="module")
def all_rows(spark) -> dict[str, list[tuple]]:
    df = read_kafka_segments(spark, str(KAFKA / "*"))
    out: dict[str, list[tuple]] = {}
    for r in df.collect():
        out.setdefault(Path(r.partition_dir).name, []).append(
            (r.segment, r.offset, r.timestamp, r.key, r.value, dict(r.headers or {}), r.batch_position)
        )
    return out


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_reproduces_manifest_records(all_rows, scenario: str) -> None:
    want = _manifest_rows(scenario)
    assert want
    got = sorted(all_rows[scenario], key=lambda t: (t[0], t[6], t[1]))
    assert len(got) == len(want)
    for g, w in zip(got, sorted(want, key=lambda t: (t[0], t[6], t[1])), strict=False):
        assert g == w


def test_two_segments_have_segment_column(all_rows) -> None:
    segs = {t[0] for t in all_rows["v2_idempotent_two_segments"]}
    assert segs == {0, 1527}


CASES = [
    ("offset >= 1500 and offset < 1600", lambda t: 1500 <= t[1] < 1600),
    ("offset > 2000", lambda t: t[1] > 2000),
    ("offset = 1527", lambda t: t[1] == 1527),
    ("offset <= 10", lambda t: t[1] <= 10),
    ("timestamp >= 1700000001000", lambda t: t[2] >= 1700000001000),
    (
        "timestamp > 1700000000500 and timestamp < 1700000000900",
        lambda t: 1700000000500 < t[2] < 1700000000900,
    ),
    ("timestamp >= 1700000000300 and offset < 100", lambda t: t[2] >= 1700000000300 and t[1] < 100),
]


@pytest.mark.parametrize(
    "scenario",
    [
        "v2_idempotent_two_segments",
        "v2_large_index_warm_section",
        "v2_log_append_time",
        "legacy_v1",
        "v2_open_segment_crash_image",
    ],
)
def test_pushdown_equals_filter_after_unfiltered_read(spark, all_rows, scenario: str) -> None:
    path = str(KAFKA / scenario)
    full = all_rows[scenario]
    for expr, pred in CASES:
        got = sorted(
            r.offset for r in read_kafka_segments(spark, path).filter(expr).select("offset").collect()
        )
        assert got == sorted(t[1] for t in full if pred(t)), expr


def test_pushdown_prunes_segments_and_start_positions() -> None:
    def parts(scenario: str, filters: list) -> list:
        r = KafkaSegmentsReader({"path": str(KAFKA / scenario)})
        assert len(list(r.pushFilters(filters))) == len(filters)  # pruning only, Spark re-checks
        return r.partitions()

    assert len(parts("v2_idempotent_two_segments", [])) == 2
    p = parts("v2_idempotent_two_segments", [GreaterThanOrEqual(("offset",), 1600)])
    assert [x.base_offset for x in p] == [1527] and p[0].start_position > 0
    p = parts("v2_idempotent_two_segments", [LessThan(("offset",), 100)])
    assert [x.base_offset for x in p] == [0]
    p = parts("v2_large_index_warm_section", [GreaterThanOrEqual(("timestamp",), 1700000010000)])
    assert len(p) == 1 and p[0].start_position > 0
    late = parts("v2_large_index_warm_section", [GreaterThanOrEqual(("timestamp",), 1800000000000)])
    assert late[0].start_position > p[0].start_position


def test_a_source_without_a_path_is_a_config_error() -> None:
    from rmqcore.errors import ConfigError
    from rmqcore.spark import KafkaSegmentsDataSource, RmqDataSource

    with pytest.raises(ConfigError, match=r"the kafka-segments source needs a path \(load\(path\)"):
        KafkaSegmentsDataSource({"compressionCodec": "none"}).reader(None)
    with pytest.raises(ConfigError, match=r"the rmq source needs a path \(load\(path\)"):
        RmqDataSource({}).reader(None)
    reader = KafkaSegmentsDataSource({"PATH": "/nonexistent-dir"}).reader(None)
    assert reader.options["path"] == "/nonexistent-dir"
