"""Pulls that wait: ``get_messages(..., wait=)``, RocketMQ's long polling (``rmqcore.live``)."""
from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any

from .. import layout as L
from ..errors import ConfigError
from .notifyfile import NotifyFile, _Poller

if TYPE_CHECKING:
    from ..store import GetResult, MessageStore

__all__ = ["pull", "HOLD", "OFFSET_OVERFLOW_ONE"]

# getMessage statuses a held pull waits on (RocketMQ: PULL_NOT_FOUND, which PullRequestHoldService holds)
OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
HOLD = frozenset({"OFFSET_OVERFLOW_ONE", "NO_MESSAGE_IN_QUEUE", "NO_MATCHED_LOGIC_QUEUE",
                  "OFFSET_FOUND_NULL"})


def _wait_arg(wait: Any) -> float:
    if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not wait >= 0 or math.isnan(wait):
        raise ConfigError(f"wait must be a number of seconds >= 0, not {wait!r}")
    return float(wait)



def pull(store: MessageStore, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
         max_bytes: int, tag_filter: str | None, wait: Any) -> GetResult:
    """``get_messages`` with ``wait`` seconds of holding (and a follower's refresh): RocketMQ's
    long polling. The queue's wake slot is read before each look, so a unit published meanwhile
    ends the wait at once; the wait ends early with StoreClosedError when the store closes."""
    if type(wait) is not float or not wait >= 0:
        wait = _wait_arg(wait)
    store._check_open()
    f = store._follower
    waits: NotifyFile | _Poller | None = f.waits if f is not None else store._notify
    if wait and (waits is None or (f is None and store._reput is None and not store._dispatch.publishing)):
        raise ConfigError(
            f"{store.store_dir}: nothing would end a wait here ("
            + ("opened read-only without follow=True" if store.read_only
               else "dispatch='inline' has no reput thread, and its puts do not publish")
            + "); pull with wait=0")
    if wait and type(topic) is not str:
        raise ConfigError(f"topic must be a str to wait on its queue, not {type(topic).__name__}")
    slot = waits.slot(topic, queue_id) if wait and waits is not None else 0
    deadline = -1.0
    gate = store._gate
    while True:
        token = waits.token(slot) if wait and waits is not None else 0
        ok = True
        gate.enter()  # each look runs in the store's lifecycle gate, the wait below outside it:
        try:  # close() seals the gate, cancels the waits and never waits for a sleeping pull
            if f is not None:
                ok, life = f.ready()
                if ok:
                    f.refresh_queue(topic, queue_id)
                    r = store._get_messages(group, topic, queue_id, offset, max_msgs, max_bytes, tag_filter)
                    if not f.still(life):
                        continue  # the writer began recovering meanwhile: what was read may be gone
                else:
                    r = _recovering(store, topic, queue_id, offset)
            else:
                r = store._get_messages(group, topic, queue_id, offset, max_msgs, max_bytes, tag_filter)
        finally:
            gate.leave()
        if not wait or r.status not in HOLD:
            return r
        now = time.monotonic()
        if deadline < 0:
            deadline = now + wait
        left = deadline - now
        if left <= 0:
            return r
        assert waits is not None
        if ok:
            waits.wait(slot, token, left)
        else:
            waits.wait(L.NF_LIFECYCLE, life, left)


def _recovering(store: MessageStore, topic: Any, queue_id: Any, offset: int) -> GetResult:
    """What a follower's pull finds while the writer recovers: nothing new, pull again from ``offset``."""
    from ..store import GetResult

    try:
        cq = store.consume_queues.get((topic, queue_id))
    except TypeError:
        cq = None
    lo, hi = (cq.min_offset, cq.max_offset) if cq is not None else (0, 0)
    return GetResult(OFFSET_OVERFLOW_ONE, offset, lo, hi, 0, b"", store)
