"""Kafka half benchmarks: index lookups per second (warm and cold section) and segment decode MB/s,
native kernels vs their pure-Python twins.

Run: ``pytest bench/bench_kafka.py --benchmark-only --benchmark-group-by=group``
(``--benchmark-columns=mean,ops`` keeps the table short). ``extra_info`` of each case holds the
derived figure (``lookups_per_s`` or ``mb_per_s``).
"""

from __future__ import annotations

import importlib
import random
import struct
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from rmqcore.kafka import LogSegment, OffsetIndex, Record, SegmentConfig, encode_batch

IMPLS = ["native", "pure"]
N_ENTRIES = 1 << 20  # an 8 MiB offset index (a little under Kafka's default 10 MiB)
LOOKUPS = 1000
LLB = 0


def _mod(impl: str, name: str) -> ModuleType:
    return importlib.import_module(f"rmqcore._{impl}.{name}")


@pytest.fixture(scope="module")
def index_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("idx") / "00000000000000000000.index"
    p.write_bytes(b"".join(struct.pack(">ii", i * 3, i * 1024) for i in range(N_ENTRIES)))
    return p


def _targets(section: str) -> list[int]:
    rng = random.Random(7)
    warm = 8192 // 8
    if section == "warm":
        lo = (N_ENTRIES - 1 - warm) * 3 + 1  # strictly above the first warm entry
        return [rng.randrange(lo, N_ENTRIES * 3) for _ in range(LOOKUPS)]
    return [rng.randrange(0, (N_ENTRIES - warm) * 3) for _ in range(LOOKUPS)]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("section", ["warm", "cold"])
def test_index_search_kernel(benchmark: Any, impl: str, section: str, index_file: Path) -> None:
    """Raw kernel: ``index_search`` over the mapped 8 MiB index, 1000 lookups per round."""
    benchmark.group = f"kafka-index-kernel-{section}"
    idx = OffsetIndex(index_file, 0, writable=False, impl=impl)
    buf = idx._buf()
    search = _mod(impl, "sparse").index_search
    targets = _targets(section)

    def run() -> int:
        s = 0
        for t in targets:
            s += search(buf, N_ENTRIES, 8, 0, 4, t, LLB, 1024)
        return s

    benchmark(run)
    benchmark.extra_info["lookups_per_s"] = LOOKUPS / benchmark.stats.stats.mean
    idx.close()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("section", ["warm", "cold"])
def test_offset_index_lookup(benchmark: Any, impl: str, section: str, index_file: Path) -> None:
    """Public API: ``OffsetIndex.lookup`` (lock + kernel + entry decode), 1000 lookups per round."""
    benchmark.group = f"kafka-index-lookup-{section}"
    idx = OffsetIndex(index_file, 0, writable=False, impl=impl)
    targets = _targets(section)

    def run() -> None:
        for t in targets:
            idx.lookup(t)

    benchmark(run)
    benchmark.extra_info["lookups_per_s"] = LOOKUPS / benchmark.stats.stats.mean
    idx.close()


@pytest.fixture(scope="module")
def segment_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~8 MiB segment of v2 batches: 10 records of ~100-byte values each (~1.2 KiB per batch)."""
    d = tmp_path_factory.mktemp("seg")
    seg = LogSegment.open(d, 0, SegmentConfig())
    rng = random.Random(3)
    off = 0
    chunks = []
    size = 0
    while size < 8 << 20:
        recs = [
            Record(off + j, 1_700_000_000_000 + off + j, b"key-%d" % (off + j), rng.randbytes(100))
            for j in range(10)
        ]
        b = encode_batch(
            recs, base_offset=off, producer_id=1, producer_epoch=0, base_sequence=off % (1 << 30)
        )
        chunks.append(b)
        size += len(b)
        off += 10
        if len(chunks) == 64:
            seg.append(b"".join(chunks))
            chunks = []
    if chunks:
        seg.append(b"".join(chunks))
    seg.close()
    return d


def _log_bytes(segment_dir: Path) -> bytes:
    return (segment_dir / "00000000000000000000.log").read_bytes()


@pytest.mark.parametrize("impl", IMPLS)
def test_segment_scan_crc(benchmark: Any, impl: str, segment_dir: Path) -> None:
    """Recovery's hot loop: header walk + CRC-32C of every batch over the whole 8 MiB ``.log``."""
    benchmark.group = "kafka-scan-crc"
    data = _log_bytes(segment_dir)
    kb = _mod(impl, "kafka_batch")
    result = benchmark(kb.scan, data, 0, len(data), 1)
    assert result[2] == kb.END
    benchmark.extra_info["mb_per_s"] = len(data) / 1e6 / benchmark.stats.stats.mean


@pytest.mark.parametrize("impl", IMPLS)
def test_segment_decode(benchmark: Any, impl: str, segment_dir: Path) -> None:
    """Full decode: header walk with CRC, then every record of every batch (varints, keys, values)."""
    benchmark.group = "kafka-decode"
    data = _log_bytes(segment_dir)
    limit = (1 << 20) if impl == "pure" else len(data)  # the pure twin is timed over the first MiB
    kb = _mod(impl, "kafka_batch")
    hdrs, _stop, _ = kb.batch_headers(data, 0, len(data), 0, -1)
    end = max(h[0] + h[1] for h in hdrs if h[0] + h[1] <= limit)

    def run() -> int:
        n = 0
        headers, _stop, _st = kb.batch_headers(data, 0, end, 1, -1)
        for pos, size, _magic, _first, _last, _ts, _crc in headers:
            count = struct.unpack_from(">i", data, pos + 57)[0]
            n += len(kb.parse_records(data, pos + 61, pos + size, count))
        return n

    benchmark(run)
    benchmark.extra_info["mb_per_s"] = end / 1e6 / benchmark.stats.stats.mean


@pytest.mark.parametrize("impl", IMPLS)
def test_segment_decode_api(benchmark: Any, impl: str, segment_dir: Path) -> None:
    """Public API: ``LogSegment.batches()`` + ``records()`` (Record objects) over 1 MiB."""
    benchmark.group = "kafka-decode-api"
    seg = LogSegment.open(segment_dir, 0, writable=False, impl=impl)
    hdrs, _stop, _st = seg.batch_headers()
    end = max(h.position + h.size for h in hdrs if h.position + h.size <= 1 << 20)

    def run() -> int:
        n = 0
        for b in seg.batches():
            if b.position >= end:
                break
            n += len(b.records())
        return n

    benchmark(run)
    benchmark.extra_info["mb_per_s"] = end / 1e6 / benchmark.stats.stats.mean
    seg.close()
