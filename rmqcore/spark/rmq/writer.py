"""``df.write.format("rmq")``: appending a DataFrame's rows to a RocketMQ store.

Columns ``topic`` (string), ``queue_id`` (int), ``body`` (binary), optional ``tags`` (string), ``keys``
(array<string> or a space-separated string), ``properties`` (map<string,string>). There is one writer
per store: the write tasks only stage their rows as Arrow IPC files in ``<path>.rmq-staging/<job>/``;
the single ``commit()`` on the driver validates every staged row, then opens the store (taking its
lock) and appends the rows partition by partition with ``MessageStore.put_batch`` -- one call per run
of up to 1 MiB / 1024 rows of one (topic, queue id), so within a partition the rows of each queue keep
their order (and get consecutive queue offsets) while rows of different queues are grouped, not
interleaved, in the CommitLog; each batch shares one store timestamp --, dispatches to the consume
queues and the index, flushes and closes it, and deletes the staging files. ``abort()`` only deletes
staging files, so a failed job leaves the store unchanged. New stores take
``commitlogFileSize``/``cqFileSize``/``flavour`` options.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]
import pyarrow.compute as pc  # type: ignore[import-untyped,unused-ignore]
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from ... import layout as L
from ...errors import (
    ConfigError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    PropertiesTooLargeError,
)

__all__ = ["RmqWriter", "StagedPart"]

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
            raise ConfigError("the rmq sink only appends: use mode('append')")
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
        from ...store import MessageStore

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
                        raise PropertiesTooLargeError(f"properties exceed {L.MAX_PROPERTIES_LEN} UTF-8 bytes")
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
    from ...message import properties_to_string

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
    from ...message import validate_topic

    names = set(table.column_names)
    for req in ("topic", "queue_id", "body"):
        if req not in names:
            raise ConfigError(f"the rmq sink needs a {req!r} column (has {sorted(names)})")
    n = table.num_rows
    if n == 0:
        return []
    topic_col = table.column("topic").combine_chunks()
    if topic_col.null_count:
        i = int(np.flatnonzero(topic_col.is_null().to_numpy(zero_copy_only=False))[0])
        raise InvalidTopicError(f"row {i}: topic is null")
    enc = pc.dictionary_encode(topic_col)
    topics = enc.dictionary.to_pylist()
    for t in topics:
        validate_topic(t)
    tidx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    q = table.column("queue_id").combine_chunks()
    qv = q.to_numpy(zero_copy_only=False) if not q.null_count else None
    if qv is None or qv.dtype.kind not in "iu":
        bad = [i for i, v in enumerate(q.to_pylist()) if v is None or not isinstance(v, int)]
        at = bad[0] if bad else 0
        raise InvalidMessageError(f"row {at}: invalid queue_id {q[at].as_py()!r}")
    qv = qv.astype(np.int64)
    badq = np.flatnonzero((qv < 0) | (qv >= 2**31))
    if len(badq):
        raise InvalidMessageError(f"row {int(badq[0])}: invalid queue_id {int(qv[badq[0]])!r}")
    body_col = table.column("body").combine_chunks()
    blen = pc.fill_null(pc.binary_length(body_col), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    big = np.flatnonzero(blen > L.DEFAULT_MAX_MESSAGE_SIZE)
    if len(big):
        i = int(big[0])
        raise MessageTooLargeError(f"row {i}: body of {int(blen[i])} bytes exceeds the 4 MiB message limit")
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
                raise PropertiesTooLargeError(
                    f"row {i}: properties of {nb} UTF-8 bytes exceed {L.MAX_PROPERTIES_LEN}")
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

