"""``spark.read`` / ``spark.readStream`` / ``df.write`` ``.format("rmq")``: RocketMQ stores in Spark.

Batch reads
-----------
``spark.read.format("rmq").load(path)`` (or ``.option("path", ...)``) reads every message of a store's
CommitLog; ``path`` may be a glob matching several broker store directories (the ``store`` column
holds each row's store directory). Schema: see :data:`SCHEMA`. ``keys`` is the KEYS property split
on single spaces (empty tokens dropped), ``tags`` the TAGS property, ``properties`` the parsed
properties map, ``msg_id`` the offset message id, hosts are ``"ip:port"``; ``physical_offset`` is
the record's CommitLog position.

Partitions are CommitLog ranges cut at record boundaries: one per CommitLog file, or
``partitionsPerFile=N`` per file (cut at the split points of the store's sparse segment indexes,
``<store>/rmqcore-index``, written by rmqcore's writable opens for closed files; without them --
foreign or never-rewritten stores -- by a native header walk counting records), or one per
``recordsPerPartition=N`` records (header walk). Each is decoded with
``CommitLog.read_batch`` (the native batch decoder) into Arrow record batches.

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

**Spark 4.3 plan caching.** The JVM keeps a Python source's read plan (pickled reader + partitions)
per DataFrame: a DataFrame is a snapshot of the store taken when it is first planned (later
appends are invisible to it), and after a filtered action on a DataFrame an unfiltered action on the
*same* DataFrame may reuse the pruned reader and return too few rows. Build a fresh DataFrame for
every logical read: :func:`read_store` does exactly that.

Writes
------
``df.write.format("rmq").mode("append").save(path)``: columns ``topic`` (string), ``queue_id`` (int),
``body`` (binary), optional ``tags`` (string), ``keys`` (array<string> or a space-separated string),
``properties`` (map<string,string>). There is one writer per store: the write tasks only stage
their rows as Arrow IPC files in ``<path>.rmq-staging/<job>/``; the single ``commit()`` on the
driver validates every staged row, then opens the store (taking its lock) and appends the rows
partition by partition with ``MessageStore.put_batch`` -- one call per run of up to 1 MiB / 1024
rows of one (topic, queue id), so within a partition the rows of each queue keep their order (and
get consecutive queue offsets) while rows of different queues are grouped, not interleaved, in
the CommitLog; each batch shares one store timestamp --, dispatches to the consume queues and the
index, flushes and closes it, and deletes the staging files. ``abort()`` only deletes staging
files, so a failed job leaves the store unchanged. New stores take
``commitlogFileSize``/``cqFileSize``/``flavour`` options.

Streaming
---------
``spark.readStream.format("rmq").load(path)`` (one store): offsets are ``{"offset": N}``, CommitLog
physical offsets, always record-aligned (the end of the valid data, never inside a torn tail).
``startingOffset``: ``earliest`` (default), ``latest`` or a number (a record boundary).
``maxRowsPerTrigger`` / ``maxBytesPerTrigger`` limit each micro-batch (at least one record per
batch); ``trigger(availableNow=True)`` reads up to the end seen at start. Restart from the
checkpoint resumes after the last committed offset.
"""

from __future__ import annotations

import glob as _glob
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)

from .. import layout as L

__all__ = ["RmqDataSource", "read_store", "SCHEMA"]

SCHEMA = (
    "store string, topic string, queue_id int, queue_offset long, physical_offset long, size int, "
    "sys_flag int, flag int, born_timestamp long, born_host string, store_timestamp long, "
    "store_host string, reconsume_times int, prepared_transaction_offset long, msg_id string, "
    "tags string, keys array<string>, properties map<string,string>, body binary"
)

ARROW_SCHEMA = pa.schema(
    [
        ("store", pa.string()),
        ("topic", pa.string()),
        ("queue_id", pa.int32()),
        ("queue_offset", pa.int64()),
        ("physical_offset", pa.int64()),
        ("size", pa.int32()),
        ("sys_flag", pa.int32()),
        ("flag", pa.int32()),
        ("born_timestamp", pa.int64()),
        ("born_host", pa.string()),
        ("store_timestamp", pa.int64()),
        ("store_host", pa.string()),
        ("reconsume_times", pa.int32()),
        ("prepared_transaction_offset", pa.int64()),
        ("msg_id", pa.string()),
        ("tags", pa.string()),
        ("keys", pa.list_(pa.string())),
        ("properties", pa.map_(pa.string(), pa.string())),
        ("body", pa.binary()),
    ]
)

_MAX = 2**63 - 1
_MIN = -(2**63)


def read_store(spark: Any, path: str, **options: Any) -> Any:
    """A fresh ``spark.read.format("rmq")`` DataFrame over ``path`` (see the module docs on why
    every logical read needs its own DataFrame)."""
    r = spark.read.format("rmq")
    for k, v in options.items():
        r = r.option(k, str(v))
    return r.load(path)


# --- store discovery and geometry ---------------------------------------------------------------------
def _store_dirs(path: str) -> list[str]:
    if any(c in path for c in "*?["):
        dirs = sorted(p for p in _glob.glob(path) if os.path.isdir(os.path.join(p, "commitlog")))
    else:
        dirs = [path]
    if not dirs:
        raise FileNotFoundError(f"no RocketMQ store matches {path!r}")
    return [os.path.abspath(d) for d in dirs]


def _geometry(store_dir: str, options: dict[str, str]) -> tuple[int, int]:
    from ..config import detect_file_size, load_geometry

    saved = load_geometry(Path(store_dir)) or {}
    cl = (
        options.get("commitlogfilesize")
        or saved.get("commitlog_file_size")
        or detect_file_size(Path(store_dir) / "commitlog")
        or L.DEFAULT_COMMITLOG_FILE_SIZE
    )
    cq = (
        options.get("cqfilesize")
        or saved.get("cq_file_size")
        or detect_file_size(Path(store_dir) / "consumequeue")
        or L.DEFAULT_CQ_FILE_SIZE
    )
    return int(cl), int(cq)


def _open_commitlog(store_dir: str, file_size: int, end: int | None = None) -> Any:
    from ..commitlog import CommitLog

    cl = CommitLog(store_dir, file_size=file_size, read_only=True, recover=end is None, prepare_next=False)
    if end is not None:
        cl.set_end(end)
    return cl


def _opts(options: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in dict(options).items()}


# --- decoding -------------------------------------------------------------------------------------------
@dataclass
class RowFilter:
    """Exact row predicates applied while decoding (pushed topic / queue id / store time)."""

    topics: frozenset[str] | None = None
    queue_ids: frozenset[int] | None = None
    ts_lo: int = _MIN  # inclusive
    ts_hi: int = _MAX  # inclusive

    @property
    def empty(self) -> bool:
        return self.topics is None and self.queue_ids is None and self.ts_lo == _MIN and self.ts_hi == _MAX

    def impossible(self) -> bool:
        return (
            self.ts_lo > self.ts_hi
            or (self.topics is not None and not self.topics)
            or (self.queue_ids is not None and not self.queue_ids)
        )


def _kernel() -> Any:
    from .. import _impl

    return _impl.kernel("arrowcols")


def _empty(n: int, dtype: Any) -> np.ndarray:
    """An uninitialised array; large ones in Arrow's memory pool. Numpy takes large arrays from
    fresh mappings that are faulted in page by page on every batch (that was a third of the decode
    time); the pool keeps and reuses freed memory."""
    dt = np.dtype(dtype)
    if n * dt.itemsize < 65536:  # glibc serves these from its heap: numpy's is quicker
        return np.empty(n, dtype=dt)
    return np.frombuffer(pa.allocate_buffer(n * dt.itemsize), dtype=dt)


def _strings(typ: pa.DataType, n: int, ov: tuple[np.ndarray, np.ndarray], valid: Any = None) -> pa.Array:
    """An Arrow string/binary array from a kernel's (int32 offsets, uint8 values)."""
    offsets, values = ov
    return pa.Array.from_buffers(typ, n, [valid, pa.py_buffer(offsets), pa.py_buffer(values)])


def _constant(s: str, n: int) -> pa.Array:
    b = np.frombuffer(s.encode(), dtype=np.uint8)
    offsets = _empty(n + 1, np.int32)
    np.multiply(np.arange(n + 1, dtype=np.int32), np.int32(len(b)), out=offsets)
    values = _empty(n * len(b), np.uint8)
    values.reshape(n, len(b))[:] = b
    return _strings(pa.string(), n, (offsets, values))


def _column(src: np.ndarray, dtype: Any) -> pa.Array:
    """A copy of a decode column (the decode buffer is reused) as an Arrow array."""
    a = _empty(len(src), dtype)
    a[:] = src
    return pa.array(a)


_MAP_TYPE = ARROW_SCHEMA.field("properties").type
_KEYS_TYPE = ARROW_SCHEMA.field("keys").type


def batch_to_arrow(
    b: Any, store: str, flt: RowFilter | None = None, stop: int | None = None
) -> pa.RecordBatch | None:
    """One ``rmqcore.commitlog.RecordBatch`` as an Arrow batch of :data:`ARROW_SCHEMA` (rows at or
    after ``stop`` and rows failing ``flt`` dropped); None when no row is left.

    Every column is built whole by the ``arrowcols`` kernel (or numpy) from the batch's bytes and
    columns: no per-row Python."""
    return columns_to_arrow(b.data, b.columns, b.start_offset, store, flt, stop)


def columns_to_arrow(
    data: Any, cols: np.ndarray, base: int, store: str, flt: RowFilter | None = None, stop: int | None = None
) -> pa.RecordBatch | None:
    """As :func:`batch_to_arrow` for decode_batch ``cols`` whose positions are relative to ``data``,
    which starts at global CommitLog offset ``base``."""
    n = cols.shape[1]
    if n == 0:
        return None
    k = _kernel()
    phys = cols[L.C_POSITION] + base
    keep = None
    if stop is not None and phys[-1] >= stop:
        keep = phys < stop
    if flt is not None and not flt.empty:
        m = np.ones(n, dtype=bool) if keep is None else keep
        if flt.queue_ids is not None:
            m &= np.isin(cols[L.C_QUEUE_ID], np.fromiter(flt.queue_ids, dtype=np.int64))
        if flt.ts_lo != _MIN:
            m &= cols[L.C_STORE_TIMESTAMP] >= flt.ts_lo
        if flt.ts_hi != _MAX:
            m &= cols[L.C_STORE_TIMESTAMP] <= flt.ts_hi
        if flt.topics is not None:
            tov = k.gather_utf8(data, cols[L.C_TOPIC_POS], cols[L.C_TOPIC_LEN], _empty)
            topics = _strings(pa.string(), n, tov)
            m &= pc.is_in(topics, value_set=pa.array(sorted(flt.topics), pa.string())).to_numpy(
                zero_copy_only=False
            )
        keep = m
    if keep is not None and not keep.all():
        cols = cols[:, keep]
        phys = phys[keep]
        n = cols.shape[1]
        if n == 0:
            return None
    sys_flag = cols[L.C_SYS_FLAG]
    (mo, ko, kd, vo, vd, to, td, tv, kso, so, sd) = k.split_properties(
        data, cols[L.C_PROPERTIES_POS], cols[L.C_PROPERTIES_LEN], _empty
    )
    ne = len(ko) - 1
    props = pa.MapArray.from_arrays(
        pa.array(mo), _strings(pa.string(), ne, (ko, kd)), _strings(pa.string(), ne, (vo, vd)), type=_MAP_TYPE
    )
    tags = _strings(
        pa.string(), n, (to, td), None if tv.all() else pa.py_buffer(np.packbits(tv, bitorder="little"))
    )
    keys = pa.Array.from_buffers(
        _KEYS_TYPE, n, [None, pa.py_buffer(kso)], children=[_strings(pa.string(), len(so) - 1, (so, sd))]
    )

    def i32(c: int) -> pa.Array:
        return _column(cols[c], np.int32)

    def i64(c: int) -> pa.Array:  # a copy: ``cols`` may be a reused decode buffer
        return _column(cols[c], np.int64)

    sh = (cols[L.C_STORE_HOST_POS], cols[L.C_STORE_PORT], sys_flag, L.FLAG_STOREHOST_V6)
    arrays = [
        _constant(store, n),
        _strings(pa.string(), n, k.gather_utf8(data, cols[L.C_TOPIC_POS], cols[L.C_TOPIC_LEN], _empty)),
        i32(L.C_QUEUE_ID),
        i64(L.C_QUEUE_OFFSET),
        _column(phys, np.int64),
        i32(L.C_SIZE),
        i32(L.C_SYS_FLAG),
        i32(L.C_FLAG),
        i64(L.C_BORN_TIMESTAMP),
        _strings(pa.string(), n, k.format_hosts(
            data, cols[L.C_BORN_HOST_POS], cols[L.C_BORN_PORT], sys_flag, L.FLAG_BORNHOST_V6, _empty)),
        i64(L.C_STORE_TIMESTAMP),
        _strings(pa.string(), n, k.format_hosts(data, *sh, _empty)),
        i32(L.C_RECONSUME_TIMES),
        i64(L.C_PREPARED_TX_OFFSET),
        _strings(pa.string(), n, k.message_ids(data, *sh, phys, _empty)),
        tags,
        keys,
        props,
        _strings(pa.binary(), n, k.gather(data, cols[L.C_BODY_POS], cols[L.C_BODY_LEN], _empty)),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


def decode_range(
    cl: Any, store: str, start: int, stop: int, flt: RowFilter | None = None, batch_rows: int = 8192
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records in ``[start, stop)`` (``start`` a record boundary).

    Decodes straight from the mapped CommitLog files (no copy of the record bytes: the Arrow
    columns are gathered from the mapping, and no view of it outlives a batch) into one reused
    column buffer."""
    from ..commitlog import column_buffer, raise_status

    off = max(start, cl.min_offset)  # files removed by retention since planning: nothing to read there
    stop = min(stop, cl.max_offset)
    codec = cl._codec
    out = column_buffer(batch_rows)
    while off < stop:
        mf = cl.queue.find(off)
        base = mf.file_from_offset
        count, end, status = codec.decode_batch(mf.mm, off - base, mf.wrote_position, out, False)
        if count:
            rb = columns_to_arrow(mf.mm, out[:, :count], base, store, flt, stop)
            if rb is not None:
                yield rb
        if status == L.ST_BLANK:
            nxt = mf.file_end_offset
        elif status < 0:
            raise_status(codec, status, mf.path, end)
        else:
            nxt = base + end
        if nxt <= off:
            break
        off = nxt


# --- batch reader -----------------------------------------------------------------------------------------
@dataclass
class RangePartition(InputPartition):
    store: str
    file_size: int
    end: int  # end of the valid CommitLog data when planned
    start: int
    stop: int
    offsets: list[int] | None = None  # explicit record offsets (key lookups)


def _file_infos(cl: Any) -> list[tuple[int, int, int, int, int]]:
    """(file_from, data_end, count, first_ts, last_ts) of each CommitLog file with data."""
    out = []
    codec = cl._codec
    for mf in cl.queue.files:
        if mf.wrote_position <= 0:
            continue
        st, end, count, last_ts = codec.scan_records(mf.mm, 0, mf.wrote_position, False, -1)
        if count == 0:
            continue
        sys_flag = int.from_bytes(mf.mm[36:40], "big")
        at = 68 if sys_flag & L.FLAG_BORNHOST_V6 else 56
        first_ts = int.from_bytes(mf.mm[at : at + 8], "big", signed=True)
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
    from ..segindex import SegmentIndex

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
    from ..consumequeue import ConsumeQueue

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
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
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
        for store in _store_dirs(o["path"]):
            file_size, cq_size = _geometry(store, o)
            if "key" in o:
                parts.extend(self._key_partitions(store, file_size, cq_size))
                continue
            cl = _open_commitlog(store, file_size)
            try:
                end = cl.max_offset
                infos = _file_infos(cl)
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
                    seg = _segindex(store, file_from)
                    try:
                        start = file_from
                        if seg is not None and seg.monotonic and self.flt.ts_lo != _MIN:
                            pos = seg.seek_time(self.flt.ts_lo - 1)
                            if 0 < pos < data_end - file_from:
                                start = file_from + pos
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
        from ..store import MessageStore

        o = self.options
        if "keytopic" not in o:
            raise ValueError("option 'key' needs option 'keyTopic' (the index hashes topic#key)")
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
        cl = _open_commitlog(partition.store, partition.file_size, partition.end)
        try:
            rows = int(self.options.get("batchrows", "8192"))
            if partition.offsets is not None:
                for off in partition.offsets:
                    rb = batch_to_arrow(cl.read_batch(off, max_records=1), partition.store, self.flt)
                    if rb is not None:
                        yield rb
                return
            yield from decode_range(cl, partition.store, partition.start, partition.stop, self.flt, rows)
        finally:
            cl.close()


# --- writer ---
@dataclass
class StagedPart(WriterCommitMessage):
    partition_id: int
    task_attempt: int
    path: str
    rows: int


def _staging_root(path: str) -> str:
    return os.path.abspath(path).rstrip("/") + ".rmq-staging"


class RmqWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str], overwrite: bool) -> None:
        if overwrite:
            raise ValueError("the rmq sink only appends: use mode('append')")
        self.options = options
        self.path = options["path"]
        self.job = uuid.uuid4().hex
        self.staging = os.path.join(_staging_root(self.path), self.job)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StagedPart:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        pid = ctx.partitionId() if ctx else 0
        attempt = ctx.attemptNumber() if ctx else 0
        os.makedirs(self.staging, exist_ok=True)
        path = os.path.join(self.staging, f"part-{pid:05d}-{attempt}-{uuid.uuid4().hex[:8]}.arrow")
        rows = 0
        writer = None
        with pa.OSFile(path, "wb") as f:
            for batch in iterator:
                if writer is None:
                    writer = pa.ipc.new_file(f, batch.schema)
                writer.write_batch(batch)
                rows += batch.num_rows
            if writer is not None:
                writer.close()
        return StagedPart(pid, attempt, path, rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from ..store import MessageStore

        o = self.options
        overrides: dict[str, Any] = {}
        if "commitlogfilesize" in o:
            overrides["commitlog_file_size"] = int(o["commitlogfilesize"])
        if "cqfilesize" in o:
            overrides["cq_file_size"] = int(o["cqfilesize"])
        if "flavour" in o:
            overrides["flavour"] = int(o["flavour"])
        if "indexslots" in o:
            overrides["index_slots"] = int(o["indexslots"])
        if "indexentries" in o:
            overrides["index_entries"] = int(o["indexentries"])
        staged = [m for m in messages if isinstance(m, StagedPart)]
        parts = sorted(staged, key=lambda m: (m.partition_id, m.path))
        try:
            tables = []
            for m in parts:
                if m.rows:
                    with pa.memory_map(m.path) as src:
                        tables.append(pa.ipc.open_file(src).read_all())
            groups = [g for t in tables for g in _batches_of(t)]  # validates every row first
            if not groups:
                return
            store = MessageStore(self.path, **overrides)
            try:
                if store.commitlog.flavour >= 5:  # properties end with a separator there
                    if max(g[5] for g in groups) + 1 > L.MAX_PROPERTIES_LEN:
                        raise ValueError(f"properties exceed {L.MAX_PROPERTIES_LEN} UTF-8 bytes")
                    groups = [(*g[:3], [r + L.PROPERTY_SEPARATOR if r else r for r in g[3]], g[4] + 1, g[5])
                              for g in groups]
                budget = max(1, min(_BATCH_BYTES, store.commitlog.file_size // 4))
                for topic, qid, bodies, raws, sizes, _longest in groups:
                    for a, z in _chunks(sizes, budget):
                        store.put_batch(topic, bodies[a:z], qid, properties_raw=raws[a:z])
                store.dispatch()
                store.flush()
            finally:
                store.close()
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
            _rmdir_quiet(_staging_root(self.path))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        _rmdir_quiet(_staging_root(self.path))


def _rmdir_quiet(p: str) -> None:
    try:
        os.rmdir(p)
    except OSError:
        pass


_BATCH_BYTES = 1 << 20  # CommitLog bytes per put_batch call (a batch never spans files)
_RECORD_OVERHEAD = 128  # header bytes of a record beside body, topic and properties (IPv6 hosts: 123)


def _chunks(sizes: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Cut rows of estimated record ``sizes`` into runs of at most ``budget`` bytes (at least one
    row each, at most 1024 rows)."""
    out, a, n = [], 0, len(sizes)
    csum = np.concatenate([[0], np.cumsum(sizes)])
    while a < n:
        z = int(np.searchsorted(csum, csum[a] + budget, side="right")) - 1
        z = min(max(z, a + 1), n, a + 1024)
        out.append((a, z))
        a = z
    return out


def _properties_raw(tags: Any, keys: Any, props: Any) -> str:
    """The flavour-4 properties string ``CommitLog.put(tags=, keys=, properties=)`` stores for a
    written row (falsy tags/keys/properties are absent, as before)."""
    from ..message import properties_to_string

    kl = [k for k in (keys.split(" ") if isinstance(keys, str) else keys) if k] if keys else []
    pm = dict(props) if props else {}
    items = [(k, v) for k, v in pm.items() if k not in (L.PROPERTY_TAGS, L.PROPERTY_KEYS)]
    if kl:
        items.append((L.PROPERTY_KEYS, L.KEY_SEPARATOR.join(kl)))
    elif L.PROPERTY_KEYS in pm:
        items.append((L.PROPERTY_KEYS, pm[L.PROPERTY_KEYS]))
    if tags:
        items.append((L.PROPERTY_TAGS, tags))
    elif L.PROPERTY_TAGS in pm:
        items.append((L.PROPERTY_TAGS, pm[L.PROPERTY_TAGS]))
    return properties_to_string(items, 4)


def _batches_of(table: pa.Table) -> list[tuple[str, int, list[bytes], list[str], np.ndarray, int]]:
    """The rows of a staged table, validated (topic, queue id, body size, properties) and grouped
    by (topic, queue id) in first-appearance order, each group's rows in table order:
    ``(topic, queue_id, bodies, flavour-4 properties strings, estimated record sizes, longest
    properties in UTF-8 bytes)``."""
    from ..message import validate_topic

    names = set(table.column_names)
    for req in ("topic", "queue_id", "body"):
        if req not in names:
            raise ValueError(f"the rmq sink needs a {req!r} column (has {sorted(names)})")
    n = table.num_rows
    if n == 0:
        return []
    topic_col = table.column("topic").combine_chunks()
    if topic_col.null_count:
        i = int(np.flatnonzero(topic_col.is_null().to_numpy(zero_copy_only=False))[0])
        raise ValueError(f"row {i}: topic is null")
    enc = pc.dictionary_encode(topic_col)
    topics = enc.dictionary.to_pylist()
    for t in topics:
        validate_topic(t)
    tidx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    q = table.column("queue_id").combine_chunks()
    qv = q.to_numpy(zero_copy_only=False) if not q.null_count else None
    if qv is None or qv.dtype.kind not in "iu":
        bad = [i for i, v in enumerate(q.to_pylist()) if v is None or not isinstance(v, int)]
        raise ValueError(f"row {bad[0] if bad else 0}: invalid queue_id {q[bad[0] if bad else 0].as_py()!r}")
    qv = qv.astype(np.int64)
    badq = np.flatnonzero((qv < 0) | (qv >= 2**31))
    if len(badq):
        raise ValueError(f"row {int(badq[0])}: invalid queue_id {int(qv[badq[0]])!r}")
    body_col = table.column("body").combine_chunks()
    blen = pc.fill_null(pc.binary_length(body_col), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    big = np.flatnonzero(blen > L.DEFAULT_MAX_MESSAGE_SIZE)
    if len(big):
        i = int(big[0])
        raise ValueError(f"row {i}: body of {int(blen[i])} bytes exceeds the 4 MiB message limit")
    bodies = [b"" if b is None else b for b in body_col.to_pylist()]
    cols = [table.column(c).to_pylist() if c in names else None for c in ("tags", "keys", "properties")]
    cache: dict[Any, tuple[str, int]] = {}
    raws: list[str] = []
    plens: list[int] = []
    for i in range(n):
        tg, ks, pr = (c[i] if c is not None else None for c in cols)
        key = (tg, tuple(ks) if isinstance(ks, list) else ks, tuple(pr) if pr else None)
        got = cache.get(key)
        if got is None:
            r = _properties_raw(tg, ks, pr)
            nb = len(r.encode("utf-8", "surrogatepass"))
            if nb > L.MAX_PROPERTIES_LEN:
                raise ValueError(f"row {i}: properties of {nb} UTF-8 bytes exceed {L.MAX_PROPERTIES_LEN}")
            got = cache[key] = (r, nb)
        raws.append(got[0])
        plens.append(got[1])
    plen = np.array(plens, dtype=np.int64)
    tlen = np.array([len(t) for t in topics], dtype=np.int64)[tidx]
    sizes = _RECORD_OVERHEAD + blen + tlen + plen
    gkey = tidx * (2**31) + qv
    order = np.argsort(gkey, kind="stable")
    sk = gkey[order]
    cuts = np.flatnonzero(np.diff(sk)) + 1
    out = []
    for idx in sorted(np.split(order, cuts), key=lambda ix: int(ix[0])):
        il = idx.tolist()
        out.append((topics[int(tidx[il[0]])], int(qv[il[0]]), [bodies[i] for i in il], [raws[i] for i in il],
                    sizes[idx], int(plen[idx].max())))
    return out


# --- streaming ---
@dataclass
class StreamPartition(InputPartition):
    store: str
    file_size: int
    end: int
    start: int
    stop: int


try:
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadMaxBytes,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older 4.x
    ReadAllAvailable = ReadMaxBytes = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]


class RmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc,unused-ignore]
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options
        dirs = _store_dirs(options["path"])
        if len(dirs) != 1:
            raise ValueError("a streaming rmq read takes one store directory")
        self.store = dirs[0]
        self.file_size, _ = _geometry(self.store, options)
        self.max_rows = int(options.get("maxrowspertrigger", "0"))
        self.max_bytes = int(options.get("maxbytespertrigger", "0"))
        self.target: int | None = None

    def _end(self) -> int:
        cl = _open_commitlog(self.store, self.file_size)
        try:
            return int(cl.max_offset)
        finally:
            cl.close()

    def initialOffset(self) -> dict[str, int]:
        s = self.options.get("startingoffset", "earliest").lower()
        if s == "latest":
            return {"offset": self._end()}
        if s == "earliest":
            cl = _open_commitlog(self.store, self.file_size)
            try:
                return {"offset": cl.min_offset}
            finally:
                cl.close()
        return {"offset": int(s)}

    def getDefaultReadLimit(self) -> Any:
        if self.max_rows > 0:
            return ReadMaxRows(self.max_rows)
        if self.max_bytes > 0:
            return ReadMaxBytes(self.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._end()

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:
        end = self._end() if self.target is None else self.target
        begin = int(start["offset"]) if start else 0
        if limit is None or isinstance(limit, ReadAllAvailable):
            max_rows, max_bytes = 0, 0
        else:
            max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.max_rows
            max_bytes = limit.max_bytes if isinstance(limit, ReadMaxBytes) else self.max_bytes
        if begin >= end or (max_rows <= 0 and max_bytes <= 0):
            return {"offset": max(begin, end)}
        return {"offset": self._advance(begin, end, max_rows, max_bytes)}

    def _advance(self, begin: int, end: int, max_rows: int, max_bytes: int) -> int:
        cl = _open_commitlog(self.store, self.file_size, end)
        try:
            off, rows, nbytes = begin, 0, 0
            while off < end:
                b = cl.read_batch(off, max_records=1024)
                sizes = b.columns[L.C_SIZE].tolist()
                pos = (b.columns[L.C_POSITION] + b.start_offset).tolist()
                for p, sz in zip(pos, sizes, strict=False):
                    if p >= end:
                        return end
                    if rows and ((max_rows and rows >= max_rows) or (max_bytes and nbytes + sz > max_bytes)):
                        return int(p)
                    rows += 1
                    nbytes += sz
                if b.next_offset <= off:
                    break
                off = b.next_offset
            return min(off, end) if off < end else end
        finally:
            cl.close()

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[StreamPartition]:
        a, z = int(start["offset"]), int(end["offset"])
        parts = []
        fs = self.file_size
        while a < z:
            file_end = (a // fs + 1) * fs
            parts.append(StreamPartition(self.store, fs, z, a, min(z, file_end)))
            a = file_end
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, StreamPartition)
        cl = _open_commitlog(partition.store, partition.file_size, partition.end)
        try:
            yield from decode_range(cl, partition.store, partition.start, partition.stop)
        finally:
            cl.close()

    def commit(self, end: dict[str, int]) -> None:
        pass


# --- the data source ---
class RmqDataSource(DataSource):
    """``format("rmq")``: batch reads, streaming reads and appends of RocketMQ stores."""

    @classmethod
    def name(cls) -> str:
        return "rmq"

    def schema(self) -> str:
        return SCHEMA

    def _options(self) -> dict[str, str]:
        o = _opts(self.options)
        if "path" not in o:
            raise ValueError("the rmq source needs a path (load(path) or option('path', ...))")
        return o

    def reader(self, schema: Any) -> RmqReader:
        return RmqReader(self._options())

    def writer(self, schema: Any, overwrite: bool) -> RmqWriter:
        return RmqWriter(self._options(), overwrite)

    def streamReader(self, schema: Any) -> RmqStreamReader:
        return RmqStreamReader(self._options())
