"""Random and bit-flipped bytes never crash the kernels or the decoders: the only outcomes are results,
walk statuses and :class:`~rmqcore.errors.RmqError` subclasses -- identical from both twins."""

from __future__ import annotations

import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqcore.errors import RmqError
from rmqcore.kafka import LogSegment, SegmentConfig
from rmqcore.kafka.records import DefaultRecordBatch, LegacyRecordBatch
from tests.conftest import twins

_SHARED = Path(__file__).resolve().parents[3] / "shared"
if not _SHARED.is_dir():  # allow an override, as tests/conftest.py does
    _SHARED = Path(os.environ.get("RMQCORE_SHARED", _SHARED))
FIXTURES = _SHARED / "fixtures" / "kafka"
SOURCES = {
    name: (FIXTURES / name / "00000000000000000000.log").read_bytes()
    for name in ("v2_transactions", "v2_compression_codecs", "legacy_v0", "legacy_v1", "v2_log_append_time")
}
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def memory_cap(limit: int = 4 << 30) -> Iterator[None]:
    """Fail loudly (MemoryError) instead of thrashing if a decoder believed a corrupt length."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    new = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (new, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def outcome(fn: Any, *args: Any) -> Any:
    try:
        return ("ok", fn(*args))
    except RmqError as e:
        return ("raise", type(e), str(e))


@st.composite
def flipped_log(draw: st.DrawFn) -> bytes:
    data = bytearray(SOURCES[draw(st.sampled_from(sorted(SOURCES)))])
    cut = draw(st.integers(0, len(data)))
    window = draw(st.integers(0, 4000))
    data = data[max(0, cut - window) : cut] if draw(st.booleans()) else data[: cut + window]
    for _ in range(draw(st.integers(1, 8))):
        if not data:
            break
        i = draw(st.integers(0, len(data) - 1))
        data[i] ^= 1 << draw(st.integers(0, 7))
    if draw(st.booleans()):
        data += draw(st.binary(max_size=64))
    return bytes(data)


LOGS = st.one_of(flipped_log(), st.binary(max_size=600))


@FUZZ
@given(
    data=LOGS,
    target=st.integers(-(1 << 63), (1 << 63) - 1),
    count=st.integers(-2, 40),
    start=st.integers(0, 200),
)
def test_kernels_never_crash_and_agree(
    data: bytes, target: int, count: int, start: int
) -> None:
    impls = twins()
    n = len(data)
    start = min(start, n)
    calls = [
        ("scan", (data, start, n, 1)),
        ("scan", (data, 0, n, 0)),
        ("batch_headers", (data, start, n, 2, -1)),
        ("batch_headers", (data, 0, n, 1, 5)),
        ("find_offset", (data, start, n, target)),
        ("find_timestamp", (data, 0, n, target)),
        ("parse_records", (data, start, n, count)),
        ("parse_records", (data, 0, n, 1)),
    ]
    with memory_cap():
        for name, args in calls:
            results = [outcome(getattr(k.kafka_batch, name), *args) for k in impls]
            assert all(r == results[0] for r in results), (name, results)


@FUZZ
@given(data=LOGS)
def test_batch_decoders_raise_only_rmq_errors(data: bytes) -> None:
    impls = twins()
    with memory_cap():
        for k in impls:
            hdrs, _stop, _st = k.kafka_batch.batch_headers(data, 0, len(data), 0, -1)
            for pos, size, magic, *_ in hdrs:
                chunk = data[pos : pos + size]
                cls = DefaultRecordBatch if magic == 2 else LegacyRecordBatch
                try:
                    b = cls(chunk, pos, k.name)
                    _ = (b.crc_valid, b.base_offset, b.last_offset, b.max_timestamp, b.compression)
                    b.records()
                except RmqError:
                    pass
            # raw decoders on unvalidated bytes as well
            for cls in (DefaultRecordBatch, LegacyRecordBatch):
                try:
                    b = cls(data[:4096], 0, k.name) if len(data) >= 61 else None
                    if b is not None:
                        b.records()
                except RmqError:
                    pass
                except Exception as e:  # struct.error on a short legacy header is the only other outcome
                    assert type(e).__name__ == "error" and len(data) < 26, e


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=flipped_log(), target=st.integers(-5, 500), ts=st.integers(1699999999000, 1700000010000))
def test_segment_on_damaged_file(
    data: bytes, target: int, ts: int, impl: SimpleNamespace, tmp_path_factory: Any
) -> None:
    d = tmp_path_factory.mktemp("fuzz")
    (d / "00000000000000000000.log").write_bytes(data)
    with memory_cap():
        seg = LogSegment.open(
            d, 0, SegmentConfig(index_interval_bytes=256, segment_index_bytes=4096), impl=impl.name
        )
        for call in (
            lambda: list(seg.batches()),
            lambda: seg.translate_offset(target),
            lambda: seg.find_offset_by_timestamp(ts),
            lambda: seg.read_next_offset(),
        ):
            try:
                call()
            except RmqError:
                pass
        try:
            truncated = seg.recover()
        except RmqError:
            # offsets are not covered by any CRC: a flipped offset that cannot be stored relative to
            # the base offset (or goes backwards) stops recovery loudly instead of losing data
            seg.close_handlers()
            return
        assert 0 <= truncated <= len(data)
        # after recovery the whole log is readable
        list(seg.batches())
        seg.close()
