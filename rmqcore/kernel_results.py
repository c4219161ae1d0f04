"""Named results of the stateful kernels, one class per result shared by both twins.

A leaf module (it imports nothing of rmqcore): ``rmqcore._native.dispatch`` and ``rmqcore._pure.dispatch``
both return a ``DispatchRun`` from ``Dispatcher.run``, so a caller reads ``r.stop`` and ``r.queue_id``,
never a position in a 10-tuple. It is still a tuple (unpacking and slicing work as they did).
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["DispatchRun", "dispatcher_busy"]


def dispatcher_busy(what: str) -> RuntimeError:
    """What both twins' ``Dispatcher`` raise for a call that would change (or share) what a run or
    a nap on another thread is using: one run at a time, bindings change between runs, and the
    hand-off words (``set_signals``, ``set_wake``) also wait out a nap. (The store makes these calls
    under its dispatch lock, which serialises them; only a caller of the kernel itself meets this.)"""
    return RuntimeError(f"the Dispatcher is in a {what} on another thread: wait for it to end")


class DispatchRun(NamedTuple):
    """What one ``Dispatcher.run`` did and why it stopped.

    ``stop`` is one of ``layout.STOP_*``; ``arg`` is what that stop needs: for STOP_QUEUE the
    position of the record's topic in the buffer (``topic_pos``, with ``topic_len``, ``queue_id``
    and ``queue_offset``), for STOP_INDEX the key of the record at ``at`` to resume from
    (``first_key``), for STOP_SPECIAL the reason, one of ``layout.SPECIAL_*`` (``reason``).
    """

    done: int  # records fully applied
    at: int  # where they end in the buffer: where the next run resumes
    status: int  # the walk's status (layout.ST_*) where it ended
    stop: int  # layout.STOP_*
    arg: int  # topic_pos (STOP_QUEUE), first_key (STOP_INDEX) or reason (STOP_SPECIAL); 0 otherwise
    topic_len: int  # STOP_QUEUE: the record's topic length in bytes
    queue_id: int  # STOP_QUEUE: the record's queue id
    queue_offset: int  # STOP_QUEUE: the record's queue offset
    max_timestamp: int  # the largest store time applied, -1 when none was
    seg_entries: int  # segment-index entries in ``seg_out`` (a publish counts those there before it)

    @property
    def topic_pos(self) -> int:
        """STOP_QUEUE: where the record's topic starts in the buffer."""
        return self.arg

    @property
    def first_key(self) -> int:
        """STOP_INDEX: the key of the record at ``at`` the next run starts from."""
        return self.arg

    @property
    def reason(self) -> int:
        """STOP_SPECIAL: why the record needs the general path (layout.SPECIAL_*)."""
        return self.arg
