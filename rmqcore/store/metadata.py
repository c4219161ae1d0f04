"""The store's ``config/`` files: topics (TopicConfigManager, ``topics.json``) and consumer offsets
(ConsumerOffsetManager, ``consumerOffset.json``), written as a broker writes them.

``StoreMetadata`` owns both tables and their lock; the writer also takes in the offsets followers
commit through ``config/consumerOffset.inbox`` (``rmqcore.live.OffsetInbox``), in their order.
Thread-safety: commits and inbox drains hold ``lock`` (one table written at a time); topics are
noted by dispatch and written by the next flush.
"""
from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from ..config import int_arg
from ..configfiles import dumps_fastjson, load_with_bak, persist
from ..errors import ConfigError, CorruptionError, InvalidMessageError
from ..wire import utf8_text

__all__ = ["StoreMetadata", "check_offset_key", "offset_commit", "is_int", "is_int_text"]

_INT_TEXT = re.compile(r"-?[0-9]+")


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_int_text(v: Any) -> bool:
    """A map key fastjson wrote bare (``{0:37960}``), quoted by loads_fastjson."""
    return isinstance(v, str) and _INT_TEXT.fullmatch(v) is not None


def check_offset_key(group: Any, topic: Any) -> None:
    """A consumer offset is keyed ``topic@group`` (consumerOffset.json): both str, neither with '@'
    nor with a lone surrogate (the file is UTF-8, and a broker could not read the name back)."""
    if not (isinstance(group, str) and isinstance(topic, str)):
        raise ConfigError(f"group and topic must be str, not {type(group).__name__} and "
                          f"{type(topic).__name__}")
    if "@" in topic or "@" in group:
        raise InvalidMessageError("topic and group may not contain '@'")
    for what, name in (("group", group), ("topic", topic)):
        if not name.isascii():
            utf8_text(name, what)


def offset_commit(group: Any, topic: Any, queue_id: Any, offset: Any) -> tuple[str, int, int]:
    """A consumer-offset commit checked: its ``topic@group`` key, queue id and offset.

    Raises:
        ConfigError: a wrong type (str group and topic, integer queue id and offset).
        InvalidMessageError: a name with '@' or a lone surrogate, a queue id outside [0, 2**31 - 1]
            (as ``put`` refuses it), an offset outside int64.
    """
    check_offset_key(group, topic)
    queue_id, offset = int_arg(queue_id, "queue_id"), int_arg(offset, "offset")
    if not 0 <= queue_id <= 0x7FFFFFFF:
        raise InvalidMessageError(f"queue_id {queue_id} is out of range [0, 2**31 - 1]")
    if not -(2**63) <= offset <= 2**63 - 1:
        raise InvalidMessageError(f"offset {offset} is out of the int64 range")
    return f"{topic}@{group}", queue_id, offset


class StoreMetadata:
    """Topics and consumer offsets of the store in ``store_dir`` (see the module)."""

    def __init__(self, store_dir: Path, flavour: int, read_only: bool, inbox: Any) -> None:
        self.store_dir = store_dir
        self.flavour = flavour
        self.read_only = read_only
        self.inbox = inbox  # followers' commits (rmqcore.live.OffsetInbox)
        self.topics: dict[str, int] = {}
        self.offsets: dict[str, dict[int, int]] = {}
        self.lock = threading.RLock()
        self._topics_loaded = False
        self._topics_dirty = False

    # -- consumer offsets -------------------------------------------------------------------------------
    def _table(self, name: str, key: str) -> tuple[Path, dict[Any, Any]]:
        """The map under ``key`` in ``config/<name>`` (its .bak when the file is damaged), {} when
        there is none; CorruptionError when it is no map."""
        path = self.store_dir / "config" / name
        data = load_with_bak(path)
        table = (data or {}).get(key, {}) if isinstance(data, dict) else {}
        if not isinstance(table, dict):
            raise CorruptionError(f"{key} is not a map", path=str(path))
        return path, table

    def load_offsets(self) -> None:
        path, table = self._table("consumerOffset.json", "offsetTable")
        for key, qmap in table.items():
            # ConsumerOffsetManager.offsetTable: topic@group -> {queue id: offset}, integers only
            if not isinstance(qmap, dict) or not all(is_int_text(q) and is_int(v) for q, v in qmap.items()):
                raise CorruptionError(f"offsets of {key!r} are not a map of integers: {qmap!r:.80}",
                                      path=str(path))
            self.offsets[key] = {int(q): v for q, v in qmap.items()}

    def persist_offsets(self) -> None:
        table = {k: dict(v) for k, v in self.offsets.items()}
        persist(self.store_dir / "config" / "consumerOffset.json",
                dumps_fastjson({"offsetTable": table}) + "\n")

    def commit(self, key: str, queue_id: int, offset: int) -> None:
        """Record ``offset`` for ``key`` (``topic@group``) and queue, and write the table; on failure
        (a full disk) the table keeps the old answer."""
        with self.lock:  # commits of other threads: one table written at a time
            self.drain_inbox()  # followers' commits made before this one come first
            before = self.offsets.get(key)
            self.offsets[key] = {**(before or {}), queue_id: offset}
            try:
                self.persist_offsets()
            except BaseException:  # not committed (DiskFullError...): fetch keeps the old answer
                if before is None:
                    del self.offsets[key]
                else:
                    self.offsets[key] = before
                raise

    def fetch(self, key: str, queue_id: int) -> int:
        """The committed offset of ``key`` (``topic@group``) on a queue, -1 when none."""
        return self.offsets.get(key, {}).get(queue_id, -1)

    def drain_inbox(self) -> None:
        """Apply the consumer offsets followers committed, in their order, and persist them."""
        def apply(lines: list[tuple[str, int, int]]) -> None:
            for key, qid, off in lines:
                self.offsets[key] = {**self.offsets.get(key, {}), qid: off}
            self.persist_offsets()

        with self.lock:
            self.inbox.drain(apply)

    # -- topics ---------------------------------------------------------------------------------------------
    def load_topics(self) -> None:
        self._topics_loaded = True
        path, table = self._table("topics.json", "topicConfigTable")
        for name, tc in table.items():
            nq: Any = tc.get("writeQueueNums", 4) if isinstance(tc, dict) else None
            if not is_int(nq):
                raise CorruptionError(f"topic {name!r} has no integer writeQueueNums: {tc!r:.80}",
                                      path=str(path))
            self.topics[name] = int(nq)

    def persist_topics(self) -> None:
        table = {}
        for name, nq in sorted(self.topics.items()):
            tc: dict[str, Any] = {
                "order": False, "perm": 6, "readQueueNums": nq, "topicFilterType": "SINGLE_TAG",
                "topicName": name, "topicSysFlag": 0, "writeQueueNums": nq,
            }
            if self.flavour >= 5:
                tc["attributes"] = {}
            table[name] = tc
        persist(self.store_dir / "config" / "topics.json", dumps_fastjson({"topicConfigTable": table}) + "\n")

    def persist_topics_if_dirty(self) -> None:
        if self._topics_dirty:
            self._topics_dirty = False  # before the snapshot: a topic noted meanwhile is written next time
            try:
                self.persist_topics()
            except BaseException:  # not written (a full disk): the next flush tries again
                self._topics_dirty = True
                raise

    def note_topic(self, topic: str, queue_id: int) -> None:
        n = self.topics.get(topic)
        if (n is None or queue_id >= n) and not self.read_only:
            self.topics[topic] = max(4, queue_id + 1, n or 0)
            if self._topics_loaded:
                self._topics_dirty = True  # written by the next flush (periodic, and at close)
