"""``spark.read.format("rmq")``: batch reads of RocketMQ stores (the reader and its partitions).

``spark.read.format("rmq").load(path)`` (or ``.option("path", ...)``) reads every message of a store's
CommitLog; ``path`` may be a glob matching several broker store directories (the ``store`` column
holds each row's store directory). Schema: :data:`rmqcore.columnar.arrow.SCHEMA`. ``keys`` is the KEYS
property split on single spaces (empty tokens dropped), ``tags`` the TAGS property, ``properties`` the
parsed properties map, ``msg_id`` the offset message id, hosts are ``"ip:port"``; ``physical_offset``
is the record's CommitLog position.

**Projection.** Spark 4.3 has no column pruning for Python sources: every query pays for every
column of the source's schema. Give a subset instead --
``spark.read.format("rmq").schema("topic string, queue_id int, body binary")`` -- and the reader
decodes and ships only those columns (any subset, any order, the types of :data:`SCHEMA`).

Partitions are CommitLog ranges cut at record boundaries: one per CommitLog file, or
``partitionsPerFile=N`` per file (cut at the split points of the store's sparse segment indexes,
``<store>/rmqcore-index``, written by rmqcore's writable opens for closed files; without them --
foreign or never-rewritten stores -- by a native header walk counting records), or one per
``recordsPerPartition=N`` records (header walk). Each is decoded with the native batch decoder into
Arrow record batches.

Options: ``commitlogFileSize``, ``cqFileSize`` (default: ``rmqcore.json``, else the files' sizes,
as MessageStore does), ``recordsPerPartition``, ``batchRows`` (rows per Arrow batch, 8192),
``key`` + ``keyTopic`` (see below; ``indexSlots``/``indexEntries`` give the index file geometry
of foreign stores, default ``rmqcore.json`` or RocketMQ's 5M/20M), ``cqPruning`` ("true").

Filter pushdown (needs ``spark.sql.python.filterPushdown.enabled=true``):

* ``topic = x`` / ``topic IN (...)`` and ``queue_id = n`` / ``IN``: applied exactly while decoding;
  CommitLog files holding no consume-queue unit of a matching queue are skipped, but only files all
  of whose records are in consume queues (so prepared/rolled-back transactional half messages,
  never dispatched, are still found; ``cqPruning=false`` turns the file skipping off).
* ``store_timestamp`` comparisons (``= < <= > >=``): applied exactly; files whose
  [first, last] store time range misses the range are skipped (RocketMQ assigns store times under
  the put lock, so they are non-decreasing in CommitLog order); with a segment index whose times
  are monotonic, reading starts at the index's seek position for the lower bound.
* Everything else is evaluated by Spark. ``array_contains(keys, k)`` is not pushable: use the
  options ``key=k`` and ``keyTopic=t``, which look the key up in the store's index files
  (``MessageStore.query_by_key``, collisions dropped, at most ``keyMaxNum`` (64) matches) and read
  only those records.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from ... import layout as L
from ...columnar.arrow import _MIN, ARROW_SCHEMA, RowFilter, batch_to_arrow, decode_range
from ...columnar.stores import open_commitlog, store_dirs
from ...errors import ConfigError
from ...wire import store_timestamp_at
from .options import store_geometry

__all__ = ["RmqReader", "RangePartition", "COVERED"]

# option set by rmqcore.spark.read_store: the CommitLog ranges read from Parquet files instead, and
# where the log ended when it planned: {store dir: {"end": offset, "files": {file base offset: file
# position where the Parquet ends, or -1 for the whole file}}}
COVERED = "rmqcore.covered"

@dataclass
class RangePartition(InputPartition):
    store: str
    file_size: int
    end: int  # end of the valid CommitLog data when planned
    start: int
    stop: int
    offsets: list[int] | None = None  # explicit record offsets (key lookups)


def _file_infos(cl: Any, skip: set[int]) -> list[tuple[int, int, int, int, int]]:
    """(file_from, data_end, count, first_ts, last_ts) of each CommitLog file with data but those
    whose base offset is in ``skip`` (the counts and times are those of the whole file)."""
    out = []
    codec = cl._codec
    for mf in cl.queue.files:
        if mf.wrote_position <= 0 or mf.file_from_offset in skip:
            continue
        st, end, count, last_ts = codec.scan_records(mf.mm, 0, mf.wrote_position, False, -1)
        if count == 0:
            continue
        first_ts = store_timestamp_at(mf.mm, 0, mf.wrote_position)
        if first_ts is None:  # no whole record (count says there is one)
            continue
        out.append((mf.file_from_offset, mf.file_from_offset + end, count, first_ts, last_ts))
    return out


def _split_file(cl: Any, file_from: int, data_end: int, per: int) -> list[tuple[int, int]]:
    if per <= 0:
        return [(file_from, data_end)]
    mf = cl.queue.find(file_from)
    out, pos, limit = [], 0, data_end - file_from
    while pos < limit:
        st, end, count, _ = cl._codec.scan_records(mf.mm, pos, limit, False, per)
        if count == 0 or end <= pos:
            break
        out.append((file_from + pos, file_from + end))
        pos = end
    if pos < limit:
        out.append((file_from + pos, data_end))
    return out


def _segindex(store_dir: str, file_from: int) -> Any:
    """The complete sparse index of a closed CommitLog file (``<store>/rmqcore-index``), or None."""
    from ...segindex import SegmentIndex

    d = Path(store_dir) / "rmqcore-index"
    name = L.offset_to_file_name(file_from)
    if not (d / f"{name}.state").is_file() or not (d / f"{name}.index").is_file():
        return None
    try:
        seg = SegmentIndex(d, file_from, writable=False)
    except Exception:
        return None
    if not seg.complete:
        seg.close(False)
        return None
    return seg


def _cq_files(
    store_dir: str, cq_size: int, file_size: int, flt: RowFilter
) -> tuple[set[int], dict[int, int]] | None:
    """Files with units of matching queues, and units per file over all queues."""
    from ...consumequeue import ConsumeQueue

    root = Path(store_dir) / "consumequeue"
    if not root.is_dir():
        return None
    hit: set[int] = set()
    per_file: dict[int, int] = {}
    for tdir in sorted(root.iterdir()):
        if not tdir.is_dir():
            continue
        for qdir in sorted(tdir.iterdir()):
            if not qdir.is_dir() or not qdir.name.lstrip("-").isdigit():
                continue
            cq = ConsumeQueue(store_dir, tdir.name, int(qdir.name), file_size=cq_size, read_only=True)
            try:
                cq.load()
                cq.recover()
                units = cq.all_units()
            finally:
                cq.close()
            if len(units) == 0:
                continue
            offs = units["offset"].astype(np.int64)
            offs = offs[offs >= 0]
            files = (offs // file_size) * file_size
            fu, fc = np.unique(files, return_counts=True)
            for f, c in zip(fu.tolist(), fc.tolist(), strict=False):
                per_file[f] = per_file.get(f, 0) + c
            match = (flt.topics is None or tdir.name in flt.topics) and (
                flt.queue_ids is None or int(qdir.name) in flt.queue_ids
            )
            if match:
                hit.update(fu.tolist())
    return hit, per_file


class RmqReader(DataSourceReader):
    """Plans CommitLog ranges (pruned by the pushed filters) and decodes them into Arrow batches
    of ``schema`` (the whole ``rmq`` schema, or the user's projection of it)."""

    def __init__(self, options: dict[str, str], schema: pa.Schema = ARROW_SCHEMA) -> None:
        self.options = options
        self.schema = schema
        self.flt = RowFilter()

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        f = self.flt
        for flt in filters:
            col = flt.attribute[0] if len(flt.attribute) == 1 else None
            if col == "topic" and isinstance(flt, (EqualTo, In)):
                vals = frozenset([flt.value] if isinstance(flt, EqualTo) else flt.value)
                if all(isinstance(v, str) for v in vals):
                    f.topics = vals if f.topics is None else f.topics & vals
                    continue
            elif col == "queue_id" and isinstance(flt, (EqualTo, In)):
                vals = frozenset([flt.value] if isinstance(flt, EqualTo) else flt.value)
                if all(isinstance(v, int) for v in vals):
                    f.queue_ids = vals if f.queue_ids is None else f.queue_ids & vals
                    continue
            elif col == "store_timestamp" and isinstance(
                flt, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)
            ):
                v = flt.value
                if isinstance(v, int):
                    if isinstance(flt, (EqualTo, GreaterThanOrEqual)):
                        f.ts_lo = max(f.ts_lo, v)
                    if isinstance(flt, GreaterThan):
                        f.ts_lo = max(f.ts_lo, v + 1)
                    if isinstance(flt, (EqualTo, LessThanOrEqual)):
                        f.ts_hi = min(f.ts_hi, v)
                    if isinstance(flt, LessThan):
                        f.ts_hi = min(f.ts_hi, v - 1)
                    continue
            yield flt

    def partitions(self) -> list[RangePartition]:
        o = self.options
        parts: list[RangePartition] = []
        per = int(o.get("recordsperpartition", "0"))
        if self.flt.impossible():
            return [RangePartition("", 0, 0, 0, 0, [])]
        covered = json.loads(o.get(COVERED, "{}"))
        for store in store_dirs(o["path"]):
            file_size, cq_size = store_geometry(store, o)
            if "key" in o:
                parts.extend(self._key_partitions(store, file_size, cq_size))
                continue
            cover = covered.get(store)
            cl = open_commitlog(store, file_size)
            try:
                if cover is not None and cover["end"] < cl.max_offset:
                    cl.set_end(cover["end"])  # the records read_store planned on, not those written since
                end = cl.max_offset
                begins = {int(f): int(e) for f, e in (cover or {}).get("files", {}).items()}
                infos = _file_infos(cl, {f for f, e in begins.items() if e < 0})
                keep_files = None
                if (self.flt.topics is not None or self.flt.queue_ids is not None) and o.get(
                    "cqpruning", "true"
                ).lower() == "true":
                    got = _cq_files(store, cq_size, file_size, self.flt)
                    if got is not None:
                        hit, units_per_file = got
                        # skip a file only when every record in it is in some consume queue
                        keep_files = {
                            fi[0] for fi in infos if fi[0] in hit or units_per_file.get(fi[0], 0) != fi[2]
                        }
                per_file = int(o.get("partitionsperfile", "1"))
                for file_from, data_end, count, first_ts, last_ts in infos:
                    if keep_files is not None and file_from not in keep_files:
                        continue
                    if last_ts < self.flt.ts_lo or first_ts > self.flt.ts_hi:
                        continue
                    start = file_from + begins.get(file_from, 0)  # past a copy of the file's start
                    if start >= data_end:
                        continue
                    seg = _segindex(store, file_from)
                    try:
                        if seg is not None and seg.monotonic and self.flt.ts_lo != _MIN:
                            pos = seg.seek_time(self.flt.ts_lo - 1)
                            if 0 < pos < data_end - file_from:
                                start = max(start, file_from + pos)
                        if per_file > 1 and seg is not None:
                            cuts = [
                                file_from + p
                                for p in seg.split_points(per_file)
                                if start < file_from + p < data_end
                            ]
                            bounds = [start, *cuts, data_end]
                            ranges = list(zip(bounds, bounds[1:], strict=False))
                        elif per_file > 1:
                            ranges = _split_file(cl, file_from, data_end, -(-count // per_file))
                        else:
                            ranges = _split_file(cl, file_from, data_end, per)
                    finally:
                        if seg is not None:
                            seg.close(False)
                    for a, z in ranges:
                        if z > start:
                            parts.append(RangePartition(store, file_size, end, max(a, start), z))
            finally:
                cl.close()
        return parts or [RangePartition("", 0, 0, 0, 0, [])]

    def _key_partitions(self, store: str, file_size: int, cq_size: int) -> list[RangePartition]:
        from ...store import MessageStore

        o = self.options
        if "keytopic" not in o:
            raise ConfigError("option 'key' needs option 'keyTopic' (the index hashes topic#key)")
        kw: dict[str, Any] = {"commitlog_file_size": file_size, "cq_file_size": cq_size}
        if "indexslots" in o:
            kw["index_slots"] = int(o["indexslots"])
        if "indexentries" in o:
            kw["index_entries"] = int(o["indexentries"])
        ms = MessageStore(store, read_only=True, **kw)
        try:
            msgs = ms.query_by_key(o["keytopic"], o["key"], max_num=int(o.get("keymaxnum", "64")))
            end = ms.commitlog.max_offset
        finally:
            ms.close()
        offs = sorted(m.position for m in msgs)
        return [RangePartition(store, file_size, end, 0, 0, offs)] if offs else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangePartition)
        if not partition.store:
            return
        cl = open_commitlog(partition.store, partition.file_size, partition.end)
        try:
            rows = int(self.options.get("batchrows", "8192"))
            if partition.offsets is not None:
                for off in partition.offsets:
                    rb = batch_to_arrow(cl.read_batch(off, max_records=1), partition.store, self.flt, None,
                                        self.schema)
                    if rb is not None:
                        yield rb
                return
            p = partition
            yield from decode_range(cl, p.store, p.start, p.stop, self.flt, rows, self.schema)
        finally:
            cl.close()

