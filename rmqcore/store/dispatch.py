"""The dispatch apply path for records the native ``Dispatcher`` leaves to Python (RocketMQ's
CommitLogDispatcherBuildConsumeQueue and CommitLogDispatcherBuildIndex): one function each for the
tagsCode the general path computes, and for the consume-queue units and index entries of a batch.

``MessageStore`` (its general path, ``_dispatch_one``) and Spark maintenance (``rebuild``, from the
columns its tasks computed) both write through ``apply_batch``, so the files they build are the same.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import layout as L
from ..consumequeue import ConsumeQueue, put_grouped
from ..message import MessageExt, compute_tags_code

__all__ = ["apply_batch", "general_tags"]


def general_tags(codec: Any, buf: Any, limit: int, file_from: int, positions: Any, flags: Any, tags: Any) -> None:
    """Set ``tags[i]`` for the records whose dispatch flags (``D_FLAGS``) say the kernel could not
    compute it: the delay topic (its tagsCode is the delivery time) or invalid UTF-8."""
    for i in np.flatnonzero(flags & 3).tolist():
        rec = codec.decode_record(buf, int(positions[i]), limit, False)
        m = MessageExt(file_from + int(positions[i]), rec)
        tags[i] = compute_tags_code(m.topic, m.properties, m.store_timestamp)


def apply_batch(queue_of: Callable[[int], ConsumeQueue], topic_ids: Any, queue_ids: Any, phys: Any, sizes: Any,
                tags: Any, queue_offsets: Any, tran: Any, index: Any, keys: Any, key_counts: Any,
                store_timestamps: Any) -> None:
    """Write a batch of dispatched records (parallel int64 arrays, CommitLog order): a unit in its
    queue for each NOT_TYPE and COMMIT record (grouped per queue, the order kept inside each; the
    queue of group key ``topic_id << 32 | queue_id`` comes from ``queue_of``), then, with an
    ``index``, the records' key hashes (``keys``, ``key_counts[i]`` of them for record i; ROLLBACK
    records add none)."""
    sel = np.flatnonzero((tran == L.TRANSACTION_NOT_TYPE) | (tran == L.TRANSACTION_COMMIT))
    if len(sel):
        gkey = (topic_ids[sel] << 32) | (queue_ids[sel] & 0xFFFFFFFF)
        put_grouped(queue_of, gkey, phys[sel], sizes[sel], tags[sel], queue_offsets[sel])
    if index is not None:
        index.put_record_keys(keys, key_counts, tran, phys, store_timestamps)
