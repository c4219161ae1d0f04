"""CommitLog records as Arrow record batches: the ``rmq`` schema, built whole per batch (no per-row Python).

The ``rmq`` Spark source, ``rmqcore materialize`` and the Parquet copies all use this one conversion
and this one schema (:data:`ARROW_SCHEMA`; :data:`SCHEMA` is the same as a Spark DDL string). A
*projection* -- a subset of the columns, in any order -- builds only the columns asked for: the
kernels that make the other ones (hosts, message ids, the properties map) are not run.

Needs pyarrow (not pyspark).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]

from .. import layout as L
from ..errors import ConfigError

__all__ = [
    "SCHEMA",
    "ARROW_SCHEMA",
    "SPARK_TYPES",
    "RowFilter",
    "project",
    "batch_to_arrow",
    "columns_to_arrow",
    "decode_range",
]

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



def spark_type(t: pa.DataType) -> str:
    """Arrow type ``t`` as Spark's ``DataType.simpleString()`` spells it (strings, binaries, 32/64-bit
    integers and lists and maps of them: the types of the rmq and kafka-segments schemas)."""
    if pa.types.is_list(t):
        return f"array<{spark_type(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{spark_type(t.key_type)},{spark_type(t.item_type)}>"
    return {pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint", pa.binary(): "binary"}[t]


def spark_ddl(schema: pa.Schema) -> str:
    """Arrow ``schema`` as a Spark DDL string (``"name type, ..."``)."""
    return ", ".join(f"{f.name} {spark_type(f.type)}" for f in schema)


#: The rmq schema as a Spark DDL string.
SCHEMA = spark_ddl(ARROW_SCHEMA)
# each column's type as Spark's DataType.simpleString() spells it (a user-given schema must match)
SPARK_TYPES = {f.name: spark_type(f.type) for f in ARROW_SCHEMA}

_MAX = 2**63 - 1
_MIN = -(2**63)


def project(columns: Sequence[tuple[str, str | None]]) -> pa.Schema:
    """The Arrow schema of a projection: ``columns`` are ``(name, spark type or None)`` pairs, names
    matched case-insensitively against :data:`ARROW_SCHEMA` (the batch carries the given names).

    Raises:
        ConfigError: an unknown or repeated column, or a type other than the column's own.
    """
    if not columns:
        raise ConfigError("a projection of the rmq schema needs at least one column")
    fields, seen = [], set()
    for name, typ in columns:
        canon = name.lower()
        if canon not in SPARK_TYPES:
            raise ConfigError(f"the rmq schema has no column {name!r} (its columns: {SCHEMA})")
        if canon in seen:
            raise ConfigError(f"column {name!r} appears twice in the schema")
        if typ is not None and typ != SPARK_TYPES[canon]:
            raise ConfigError(f"column {name!r} is {SPARK_TYPES[canon]} in the rmq schema, not {typ}")
        seen.add(canon)
        fields.append(pa.field(name, ARROW_SCHEMA.field(canon).type))
    return pa.schema(fields)


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

    @property
    def has_time(self) -> bool:
        return self.ts_lo != _MIN or self.ts_hi != _MAX

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
_INT_COLUMNS = {
    "queue_id": (L.C_QUEUE_ID, np.int32),
    "queue_offset": (L.C_QUEUE_OFFSET, np.int64),
    "size": (L.C_SIZE, np.int32),
    "sys_flag": (L.C_SYS_FLAG, np.int32),
    "flag": (L.C_FLAG, np.int32),
    "born_timestamp": (L.C_BORN_TIMESTAMP, np.int64),
    "store_timestamp": (L.C_STORE_TIMESTAMP, np.int64),
    "reconsume_times": (L.C_RECONSUME_TIMES, np.int32),
    "prepared_transaction_offset": (L.C_PREPARED_TX_OFFSET, np.int64),
}
_PROPERTY_COLUMNS = ("tags", "keys", "properties")


def batch_to_arrow(
    b: Any,
    store: str,
    flt: RowFilter | None = None,
    stop: int | None = None,
    schema: pa.Schema = ARROW_SCHEMA,
) -> pa.RecordBatch | None:
    """One ``rmqcore.commitlog.RecordBatch`` as an Arrow batch of ``schema`` (:data:`ARROW_SCHEMA` or
    a :func:`project`\\ ion of it; rows at or after ``stop`` and rows failing ``flt`` dropped); None
    when no row is left."""
    return columns_to_arrow(b.data, b.columns, b.start_offset, store, flt, stop, schema)


def _keep(data: Any, cols: np.ndarray, phys: np.ndarray, flt: RowFilter | None, stop: int | None) -> Any:
    """The rows to keep (a bool mask), or None for all of them."""
    n = cols.shape[1]
    keep = None
    if stop is not None and phys[-1] >= stop:
        keep = phys < stop
    if flt is None or flt.empty:
        return keep
    m = np.ones(n, dtype=bool) if keep is None else keep
    if flt.queue_ids is not None:
        m &= np.isin(cols[L.C_QUEUE_ID], np.fromiter(flt.queue_ids, dtype=np.int64))
    if flt.ts_lo != _MIN:
        m &= cols[L.C_STORE_TIMESTAMP] >= flt.ts_lo
    if flt.ts_hi != _MAX:
        m &= cols[L.C_STORE_TIMESTAMP] <= flt.ts_hi
    if flt.topics is not None:
        tov = _kernel().gather_utf8(data, cols[L.C_TOPIC_POS], cols[L.C_TOPIC_LEN], _empty)
        topics = _strings(pa.string(), n, tov)
        value_set = pa.array(sorted(flt.topics), pa.string())
        m &= pc.is_in(topics, value_set=value_set).to_numpy(zero_copy_only=False)
    return m


def columns_to_arrow(
    data: Any,
    cols: np.ndarray,
    base: int,
    store: str,
    flt: RowFilter | None = None,
    stop: int | None = None,
    schema: pa.Schema = ARROW_SCHEMA,
) -> pa.RecordBatch | None:
    """As :func:`batch_to_arrow` for decode_batch ``cols`` whose positions are relative to ``data``,
    which starts at global CommitLog offset ``base``.

    Every column is built whole by the ``arrowcols`` kernel (or numpy) from the batch's bytes and
    columns, and only the columns of ``schema`` are built."""
    n = cols.shape[1]
    if n == 0:
        return None
    k = _kernel()
    phys = cols[L.C_POSITION] + base
    keep = _keep(data, cols, phys, flt, stop)
    if keep is not None and not keep.all():
        cols = cols[:, keep]
        phys = phys[keep]
        n = cols.shape[1]
        if n == 0:
            return None
    sys_flag = cols[L.C_SYS_FLAG]
    props: dict[str, pa.Array] = {}

    def properties(name: str) -> pa.Array:
        if not props:  # one kernel pass makes all three
            (mo, ko, kd, vo, vd, to, td, tv, kso, so, sd) = k.split_properties(
                data, cols[L.C_PROPERTIES_POS], cols[L.C_PROPERTIES_LEN], _empty
            )
            ne = len(ko) - 1
            keys_, values_ = _strings(pa.string(), ne, (ko, kd)), _strings(pa.string(), ne, (vo, vd))
            props["properties"] = pa.MapArray.from_arrays(pa.array(mo), keys_, values_, type=_MAP_TYPE)
            valid = None if tv.all() else pa.py_buffer(np.packbits(tv, bitorder="little"))
            props["tags"] = _strings(pa.string(), n, (to, td), valid)
            keys_child = _strings(pa.string(), len(so) - 1, (so, sd))
            props["keys"] = pa.Array.from_buffers(
                _KEYS_TYPE, n, [None, pa.py_buffer(kso)], children=[keys_child]
            )
        return props[name]

    def store_hosts(fn: Callable[..., tuple[np.ndarray, np.ndarray]], *extra: Any) -> pa.Array:
        args = (data, cols[L.C_STORE_HOST_POS], cols[L.C_STORE_PORT], sys_flag, L.FLAG_STOREHOST_V6)
        return _strings(pa.string(), n, fn(*args, *extra, _empty))

    def build(name: str) -> pa.Array:
        if name in _INT_COLUMNS:
            c, dtype = _INT_COLUMNS[name]
            return _column(cols[c], dtype)  # a copy: ``cols`` may be a reused decode buffer
        if name in _PROPERTY_COLUMNS:
            return properties(name)
        if name == "store":
            return _constant(store, n)
        if name == "topic":
            topics = k.gather_utf8(data, cols[L.C_TOPIC_POS], cols[L.C_TOPIC_LEN], _empty)
            return _strings(pa.string(), n, topics)
        if name == "physical_offset":
            return _column(phys, np.int64)
        if name == "born_host":
            born = (data, cols[L.C_BORN_HOST_POS], cols[L.C_BORN_PORT], sys_flag, L.FLAG_BORNHOST_V6, _empty)
            return _strings(pa.string(), n, k.format_hosts(*born))
        if name == "store_host":
            return store_hosts(k.format_hosts)
        if name == "msg_id":
            return store_hosts(k.message_ids, phys)
        assert name == "body", name
        return _strings(pa.binary(), n, k.gather(data, cols[L.C_BODY_POS], cols[L.C_BODY_LEN], _empty))

    arrays = [build(f.name.lower()) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def decode_range(
    cl: Any,
    store: str,
    start: int,
    stop: int,
    flt: RowFilter | None = None,
    batch_rows: int = 8192,
    schema: pa.Schema = ARROW_SCHEMA,
    verify_crc: bool = False,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of the records in ``[start, stop)`` (``start`` a record boundary).

    Decodes straight from the mapped CommitLog files (no copy of the record bytes: the Arrow
    columns are gathered from the mapping, and no view of it outlives a batch) into one reused
    column buffer. Bytes that are not a valid record raise the CorruptionError with the file's path
    and the offset."""
    from ..commitlog import column_buffer, raise_status

    off = max(start, cl.min_offset)  # files removed by retention since planning: nothing to read there
    stop = min(stop, cl.max_offset)
    codec = cl._codec
    out = column_buffer(batch_rows)
    while off < stop:
        mf = cl.queue.find(off)
        base = mf.file_from_offset
        count, end, status = codec.decode_batch(mf.mm, off - base, mf.wrote_position, out, verify_crc)
        if count:
            rb = columns_to_arrow(mf.mm, out[:, :count], base, store, flt, stop, schema)
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
