"""The store's table of consume queues (``MessageStore.consume_queues``, keyed ``(topic, queue_id)``):
opened at load, looked up by every read, made by dispatch when a record needs one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import bool_arg
from ..consumequeue import ConsumeQueue
from ..errors import ConfigError, InvalidMessageError
from ..wire import utf8_text
from .metadata import is_int_text

if TYPE_CHECKING:
    from . import MessageStore

__all__ = ["load_consume_queues", "queue_of", "consume_queue"]


def load_consume_queues(store: MessageStore) -> None:
    """Open every consume queue under ``consumequeue/`` (a topic directory whose name is no UTF-8
    text, or a queue directory whose name is not a number, is skipped, as RocketMQ does)."""
    root = store.store_dir / "consumequeue"
    if not root.is_dir():
        return
    for tdir in sorted(root.iterdir()):
        if not tdir.is_dir():
            continue
        try:
            utf8_text(tdir.name, "topic directory")
        except InvalidMessageError:
            continue  # (the OS's undecodable bytes: no topic a broker or rmqcore could have written)
        for qdir in sorted(tdir.iterdir()):
            if not qdir.is_dir() or not is_int_text(qdir.name):
                continue
            cq = ConsumeQueue(store.store_dir, tdir.name, int(qdir.name), file_size=store.config.cq_file_size,
                              read_only=store.read_only, huge_pages=store._huge_pages, pool=store._map_pool,
                              spares=store._services.spares)
            cq.load()
            store.consume_queues[(tdir.name, int(qdir.name))] = cq


def queue_of(store: MessageStore, topic: str, queue_id: int) -> ConsumeQueue | None:
    """The consume queue of (topic, queue_id), None when there is none; an argument that cannot name
    a queue at all (unhashable) is a ConfigError, not the dict's TypeError."""
    try:
        return store.consume_queues.get((topic, queue_id))
    except TypeError:
        raise ConfigError(f"no queue is named by topic {topic!r} and queue_id {queue_id!r}") from None


def consume_queue(store: MessageStore, topic: str, queue_id: int, create: bool) -> ConsumeQueue | None:
    """``MessageStore.consume_queue`` outside the gate (dispatch, which close runs too): ``create``
    makes an empty one, noted in the store's topics."""
    cq = queue_of(store, topic, queue_id)
    if cq is None and bool_arg(create, "create"):
        if type(topic) is not str or type(queue_id) is not int or not 0 <= queue_id <= 0x7FFFFFFF:
            raise ConfigError(f"no queue can be made for topic {topic!r} and queue_id {queue_id!r}")
        cq = ConsumeQueue(store.store_dir, topic, queue_id, file_size=store.config.cq_file_size,
                          huge_pages=store._huge_pages, pool=store._map_pool, spares=store._services.spares)
        store.consume_queues[(topic, queue_id)] = cq
        store._meta.note_topic(topic, queue_id)
    return cq
