"""Live consumers: pulls that wait, consumers that commit, and processes that follow a live store.

How readers learn about new messages (RocketMQ's long polling, without a broker in between):

* **Publication.** Dispatch writes each consume-queue unit with its size field last, a release
  store (``notify.publish_units``; the native ``Dispatcher`` does the same). A reader that loads a
  non-zero size (acquire) sees the whole unit, and the record it points to: dispatch reads only
  records below the appender's published end, itself stored after the record's bytes. So a unit is
  visible only after its record is complete, in this process and in any other that maps the files.
* **Wake slots.** The writer owns a small shared file, ``<store>/notify`` (``layout.NOTIFY_*``
  documents its bytes): a header (state, generation, the dispatched and minimum CommitLog offsets)
  and 1024 wake slots. After a run of units, dispatch bumps the slot of every queue that got units
  (``(String.hashCode(topic) * 31 + queue id) mod 1024``); a waiter reads its slot's ``seq``
  before looking for data and sleeps on it (a futex, GIL released) until it changes. Threads of the
  writer's process and followers in other processes wait the same way: per queue, never a global
  broadcast or a sleep loop (two queues sharing a slot wake each other, harmlessly).
* **Followers.** ``MessageStore(path, read_only=True, follow=True)`` maps the notify file and, on
  each pull, extends its view of the queue: new units (``units_end``), new files (rolls), and the
  CommitLog end. It changes nothing on disk; it writes only the waiter flags in the notify map (and
  consumer offsets, through the writer: ``OffsetInbox``). When the writer restarts, it bumps the
  generation and says it is recovering before it touches any file; a follower's pulls then find
  nothing new (``OFFSET_OVERFLOW_ONE`` at the same offset) until recovery is done, then it re-maps
  what recovery replaced. A pull that overlapped the start of a recovery is done again (the
  generation is read before and after, as a seqlock). Retention: the writer publishes its new
  minimum offset; the follower drops the files that were deleted (its maps of them stayed valid).
* **No notify file** (a store a RocketMQ broker or an older rmqcore is writing): the follower polls,
  every ``FALLBACK_POLL`` seconds while waiting. It finds the CommitLog's end by scanning records (CRC
  checked) and accepts a unit only when the record it points to is below that end and has the
  unit's size, queue id and queue offset (a broker's unit bytes carry no publication order).

What a follower may see of a record that a power loss then removes: dispatch publishes records as
soon as they are in the page cache, under either flush policy, as RocketMQ's broker serves pulls
from its CommitLog's end. Under ASYNC_FLUSH a record is not durable until the next flush (up to
``flush_interval_ms``, 500 ms by default); under SYNC_FLUSH until its group commit (its producer is
still waiting for the ack). A follower on the same machine dies with the power, but what it did
with the record (a side effect elsewhere, a committed consumer offset) outlives it: after the
restart the recovered queue ends before that record, and new messages take its queue offsets. A
SIGKILL of the writer loses nothing that was published (the page cache survives it): recovery keeps
every complete record, and re-dispatch writes the same units again.

Consumer offsets: the writer is the one owner of ``config/consumerOffset.json``, as RocketMQ's broker
is. A follower's ``commit_offset`` appends a line to ``config/consumerOffset.inbox`` under an
exclusive lock (and syncs it); the writer applies the lines in order before its own commits and
reads (``fetch_offset``), in its periodic flush and at open and close, persists consumerOffset.json,
then empties the inbox. A follower's ``fetch_offset`` reads both, under the same lock.

The rooms: ``notifyfile`` (the notify file's map: the writer's announcements, everyone's waits),
``follower`` (a read-only store's view kept up with the writer), ``inbox`` (followers' consumer-offset
commits), ``pull`` (``get_messages(wait=)``), ``consumer`` (``store.consume`` / ``consume_async``).
"""
from __future__ import annotations

from .consumer import AsyncQueueConsumer, QueueConsumer, make_executor
from .follower import Follower
from .inbox import OffsetInbox
from .notifyfile import FALLBACK_POLL, NotifyFile, queue_slot
from .pull import HOLD, OFFSET_OVERFLOW_ONE, pull

__all__ = [
    "NotifyFile", "Follower", "OffsetInbox", "QueueConsumer", "AsyncQueueConsumer", "queue_slot", "pull",
    "FALLBACK_POLL", "HOLD", "OFFSET_OVERFLOW_ONE", "make_executor",
]
