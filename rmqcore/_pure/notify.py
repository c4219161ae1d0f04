"""Publication words of a live store: pure-Python twin of ``rmqcore._native.notify``.

Two things are published by a writer and waited for by readers in its own and in other processes
(``csrc/rmq_notify.h`` has the memory-ordering argument; ``rmqcore.layout`` the notify file's bytes):

* **Consume-queue units, published by their size.** ``publish_units`` writes 20-byte units with
  each unit's offset and tags code first and its size last; ``units_end`` finds where published
  units end: the first unit whose size field reads 0. A reader that sees a size sees the whole
  unit, and the record it points to (dispatch writes units only for complete records).
* **Wake slots**: a ``seq`` word and a ``waiters`` word (host-order uint32, the pair 8-aligned) in
  a shared map. ``bump`` adds one to ``seq`` after what it announces, clears ``waiters`` and wakes
  every thread sleeping on ``seq`` (futex, shared: other processes too); ``bump_all`` does it to
  a run of slots. ``wait`` sets ``waiters`` (``flag``) and sleeps while ``seq`` holds ``expected``,
  up to ``timeout`` seconds, or until ``cancel[0]`` is non-zero (an int64[1] the caller owns:
  close). ``wake`` wakes the sleepers of a slot without changing it (they look at ``cancel``).
* **Progress words**: ``wait_reach`` sleeps until an int64 a writer publishes (the CommitLog's live
  end) reaches a target, looking every ``poll_s`` (less often while it does not move): that
  writer wakes nobody, and a helper thread waiting on it this way takes the GIL only when there is
  something to do.

Every function takes a buffer and byte positions, checked once (``ValueError`` when a word is out
of range or misaligned, or a read-only buffer is to be written), and holds no state. The waits
release the GIL: the native twin in C, this one in ``ctypes``' foreign call (Linux), or in
``time.sleep`` steps of 200 us where there is no futex.

Differences that are not in results: this twin's loads and stores are plain (program order, which
x86-64 keeps; the native twin uses acquire/release on every CPU, so followers on arm64 want it),
and its ``bump`` is not one atomic swap of both words (a slot has one publisher at a time: dispatch
holds the dispatch lock), so it wakes the slot's sleepers on every bump, flagged or not.
"""
from __future__ import annotations

import ctypes
import os
import struct
import sys
import time
from typing import Any

import numpy as np

from ..layout import CQ_UNIT_FIELDS, CQ_UNIT_SIZE

__all__ = [
    "TIMEOUT", "CHANGED", "CANCELLED", "UNIT_SIZE", "publish_units", "units_end", "seq", "bump", "bump_all",
    "wake", "wait", "poke", "waits_add",
    "load64", "store64", "load32", "store32", "wait_reach", "REACH_BACKOFF",
]

TIMEOUT, CHANGED, CANCELLED = 0, 1, 2  # wait's answers
UNIT_SIZE = CQ_UNIT_SIZE
_NAP = 200e-6  # the wait step where there is no futex
REACH_BACKOFF = 16  # wait_reach looks at most this many poll_s apart while the word does not move
_U32 = struct.Struct("=I")
_I64 = struct.Struct("=q")
_BE32 = struct.Struct(">i")
_UNIT_DTYPE = np.dtype(CQ_UNIT_FIELDS)

_FUTEX_WAIT, _FUTEX_WAKE = 0, 1
_SYS_FUTEX_BY_ARCH = {"x86_64": 202, "aarch64": 98, "arm64": 98, "i686": 240, "armv7l": 240}
_SYS_FUTEX = _SYS_FUTEX_BY_ARCH.get(os.uname().machine, -1) if sys.platform.startswith("linux") else -1


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_syscall: Any = None
if _SYS_FUTEX >= 0:
    try:
        _syscall = ctypes.CDLL(None, use_errno=True).syscall  # a foreign call: the GIL is released
    except (OSError, AttributeError):
        _syscall = None


def _view(buf: Any, pos: int, width: int, writable: bool) -> memoryview:
    mv = memoryview(buf).cast("B")
    if writable and mv.readonly:
        raise ValueError("the buffer is read-only")
    if pos < 0 or pos + width > len(mv) or pos % 4:
        raise ValueError(f"a {width}-byte word at {pos} is outside a buffer of {len(mv)} bytes or misaligned")
    return mv


def _futex(buf: Any, pos: int, op: int, val: int, timeout: float | None) -> None:
    try:  # the word's address, exported for this call: a writable buffer's the cheap way (a bump's) ...
        a: Any = ctypes.c_uint32.from_buffer(buf, pos)
        addr = ctypes.addressof(a)
    except TypeError:  # ... a read-only map's (a follower's waits) through numpy
        a = np.frombuffer(buf, dtype=np.uint8)
        addr = a.ctypes.data + pos
    ts = None
    if timeout is not None:
        ns = max(0, int(timeout * 1e9))
        ts = ctypes.byref(_Timespec(ns // 1_000_000_000, ns % 1_000_000_000))
    try:
        _syscall(_SYS_FUTEX, ctypes.c_void_p(addr), op, ctypes.c_uint32(val & 0xFFFFFFFF), ts, None, 0)
    finally:
        del a


# -- consume-queue units ------------------------------------------------------------------------------
def publish_units(buf: Any, pos: int, units: Any) -> int:
    """Write whole 20-byte units (``units``: bytes-like, a multiple of 20 long) at ``pos``, each
    one's size last. Returns the position after them."""
    src = memoryview(units).cast("B")
    n = len(src)
    mv = memoryview(buf).cast("B")
    if mv.readonly:
        raise ValueError("the buffer is read-only")
    if n % UNIT_SIZE or pos < 0 or pos % 4 or pos + n > len(mv):
        raise ValueError(f"{n} bytes of units at {pos} do not fit a buffer of {len(mv)} bytes as whole units")
    if n == 0:
        return pos
    units_in = np.frombuffer(src, dtype=_UNIT_DTYPE)
    dest = np.frombuffer(mv[pos : pos + n], dtype=_UNIT_DTYPE)
    head = units_in.copy()
    head["size"] = 0
    dest[:] = head  # offsets and tags codes (sizes still 0) ...
    dest["size"] = units_in["size"]  # ... then the sizes
    del dest
    return pos + n


def units_end(buf: Any, pos: int, stop: int) -> int:
    """The position of the first unit in ``[pos, stop)`` (20 bytes apart) whose size field is 0;
    the last whole unit's end when there is none (``pos`` itself when ``stop - pos < 20``)."""
    mv = memoryview(buf).cast("B")
    if pos < 0 or pos % 4 or stop > len(mv) or stop < pos:
        raise ValueError(f"units [{pos}, {stop}) outside a buffer of {len(mv)} bytes or misaligned")
    unpack = _BE32.unpack_from
    while pos + UNIT_SIZE <= stop and unpack(mv, pos + 8)[0] != 0:
        pos += UNIT_SIZE
    return pos


# -- header words (host byte order) ---------------------------------------------------------------------
def load64(buf: Any, pos: int) -> int:
    """The int64 at ``pos`` (8-aligned)."""
    mv = _view(buf, pos, 8, False)
    if pos % 8:
        raise ValueError(f"an 8-byte word at {pos} is misaligned")
    return int(_I64.unpack_from(mv, pos)[0])


def store64(buf: Any, pos: int, value: int) -> None:
    """Publish ``value`` at ``pos`` (8-aligned) after everything written before."""
    mv = _view(buf, pos, 8, True)
    if pos % 8:
        raise ValueError(f"an 8-byte word at {pos} is misaligned")
    _I64.pack_into(mv, pos, value)


def load32(buf: Any, pos: int) -> int:
    """The uint32 at ``pos``."""
    return int(_U32.unpack_from(_view(buf, pos, 4, False), pos)[0])


def store32(buf: Any, pos: int, value: int) -> None:
    """Publish the uint32 ``value`` at ``pos`` after everything written before."""
    _U32.pack_into(_view(buf, pos, 4, True), pos, value & 0xFFFFFFFF)


# -- wake slots -----------------------------------------------------------------------------------------
def seq(buf: Any, pos: int) -> int:
    """The ``seq`` word of the slot at ``pos``: read it before looking for data, then ``wait``."""
    return load32(buf, pos)


def bump(buf: Any, pos: int) -> int:
    """Announce what was published before: ``seq`` + 1 (wrapping) and ``waiters`` 0, and wake the
    slot's sleepers. Returns the new ``seq``.

    The native twin swaps both words in one atomic step and wakes only when ``waiters`` was set.
    This twin's stores are plain: a waiter that read the new ``seq`` could set its flag between
    them and have it cleared here, and no later bump would then wake it (csrc/rmq_notify.h, 2.);
    so it wakes whether or not anyone flagged itself (a system call per bump)."""
    mv = _view(buf, pos, 8, True)
    if pos % 8:
        raise ValueError(f"an 8-byte word at {pos} is misaligned")
    v = (_U32.unpack_from(mv, pos)[0] + 1) & 0xFFFFFFFF
    _U32.pack_into(mv, pos, v)
    _U32.pack_into(mv, pos + 4, 0)
    if _syscall is not None:
        _futex(buf, pos, _FUTEX_WAKE, 0x7FFFFFFF, None)
    return int(v)


def bump_all(buf: Any, pos: int, count: int, waits_pos: int = -1) -> None:
    """``bump`` ``count`` consecutive slots from ``pos`` (a writer's open and close: every waiter
    looks again), with the same words after it. ``waits_pos``: a count of the waits in progress
    (``waits_add``; -1: none) that every waiter raises before it flags itself. This twin wakes
    every slot only while that count is nonzero, looked at after all the slots moved (a futex
    call orders the looks after the stores): a wait that counted itself later sees the new
    ``seq`` before it sleeps. The native twin wakes the flagged slots, as its ``bump`` does."""
    if not 0 <= count <= 1 << 40:
        raise ValueError(f"count {count} outside [0, 2**40]")
    mv = _view(buf, pos, 8 * count, True)
    if pos % 8:
        raise ValueError(f"an 8-byte word at {pos} is misaligned")
    words = np.frombuffer(mv, dtype=np.uint32, count=2 * count, offset=pos)
    words[0::2] += np.uint32(1)  # wraps, as seq does
    words[1::2] = 0
    del words
    if _syscall is None or count == 0:
        return
    _futex(buf, pos, _FUTEX_WAKE, 0x7FFFFFFF, None)  # (a full barrier in the kernel) the first slot
    if waits_pos < 0 or _U32.unpack_from(_view(buf, waits_pos, 4, False), waits_pos)[0] != 0:
        for i in range(1, count):
            _futex(buf, pos + 8 * i, _FUTEX_WAKE, 0x7FFFFFFF, None)


def poke(buf: Any, pos: int) -> None:
    """``bump`` the slot at ``pos`` only if a waiter flagged itself there (a publisher's cheap look)."""
    mv = _view(buf, pos, 8, True)
    if pos % 8:
        raise ValueError(f"an 8-byte word at {pos} is misaligned")
    if _U32.unpack_from(mv, pos + 4)[0] != 0:
        bump(buf, pos)


def waits_add(buf: Any, pos: int, delta: int) -> int:
    """Add ``delta`` (+1 or -1) to the count of waits in progress at ``pos`` (a uint32 word), never
    below 0; returns the new count. The native twin's add is atomic across processes; this twin's
    is a load and a store (two processes entering at once may count one wait: the writer's puts
    then wake its reput thread late, within its nap, until the next wait counts itself again)."""
    if delta not in (1, -1):
        raise ValueError(f"delta {delta}: +1 or -1")
    mv = _view(buf, pos, 4, True)
    v = _U32.unpack_from(mv, pos)[0]
    n = max(0, v + delta) & 0xFFFFFFFF
    _U32.pack_into(mv, pos, n)
    return int(n)


def wake(buf: Any, pos: int) -> None:
    """Wake every thread sleeping on the slot at ``pos`` (any process), changing nothing."""
    _view(buf, pos, 4, False)
    if _syscall is not None:
        _futex(buf, pos, _FUTEX_WAKE, 0x7FFFFFFF, None)


def wait(buf: Any, pos: int, expected: int, timeout: float, cancel: Any = None, flag: bool = True,
         slice_s: float = 0.0, spin_s: float = 0.0) -> int:
    """Sleep until the slot's ``seq`` is not ``expected`` (CHANGED), ``cancel[0]`` is non-zero
    (CANCELLED) or ``timeout`` seconds pass (TIMEOUT; a negative timeout: no limit). ``flag`` sets
    the slot's ``waiters`` word so that ``bump`` wakes this thread (needs a writable buffer); without
    it each sleep lasts at most ``slice_s`` (when > 0). The GIL is released while asleep.

    ``spin_s``: the native twin first spins up to this long on ``seq`` (without the GIL) before it
    sleeps, which shortens the wake-up of a publication that comes within it; a latency measure
    only, with the same answers, so this twin takes it and sleeps at once (a Python spin would hold
    the GIL)."""
    mv = _view(buf, pos, 8, flag)
    expected &= 0xFFFFFFFF
    if cancel is not None and (getattr(cancel, "shape", None) != (1,)
                               or np.asarray(cancel).dtype.itemsize != 8):
        raise ValueError("cancel must be an int64[1]")
    now = time.monotonic()
    deadline = float("inf") if timeout < 0 else now + timeout
    unpack = _U32.unpack_from
    while True:
        if cancel is not None and int(cancel[0]) != 0:
            return CANCELLED
        if unpack(mv, pos)[0] != expected:
            return CHANGED
        if flag:
            _U32.pack_into(mv, pos + 4, 1)
            if unpack(mv, pos)[0] != expected:
                return CHANGED
        now = time.monotonic()
        if now >= deadline:
            return TIMEOUT
        step = deadline - now
        if slice_s > 0:
            step = min(step, slice_s)
        if _syscall is not None:
            _futex(buf, pos, _FUTEX_WAIT, expected, min(step, 1e6))
        else:
            time.sleep(min(step, _NAP))


def wait_reach(buf: Any, pos: int, target: int, timeout: float, cancel: Any = None,
               poll_s: float = 0.002) -> int:
    """Sleep until the int64 at ``pos`` (8-aligned) is at least ``target`` (CHANGED), ``cancel[0]``
    is non-zero (CANCELLED) or ``timeout`` seconds pass (TIMEOUT; a negative timeout: no limit),
    looking every ``poll_s`` seconds while the word moves and backing off to ``REACH_BACKOFF``
    times that while it does not (the GIL released in between: ``time.sleep``)."""
    mv = _view(buf, pos, 8, False)
    if pos % 8:
        raise ValueError(f"an 8-byte word at {pos} is misaligned")
    if cancel is not None and (getattr(cancel, "shape", None) != (1,)
                               or np.asarray(cancel).dtype.itemsize != 8):
        raise ValueError("cancel must be an int64[1]")
    poll_s = min(max(poll_s, 1e-6), 1.0)
    nap = poll_s
    deadline = float("inf") if timeout < 0 else time.monotonic() + timeout
    unpack = _I64.unpack_from
    seen = unpack(mv, pos)[0]
    while True:
        if cancel is not None and int(cancel[0]) != 0:
            return CANCELLED
        v = unpack(mv, pos)[0]
        if v >= target:
            return CHANGED
        if v != seen:  # the writer is writing: look often
            seen, nap = v, poll_s
        now = time.monotonic()
        if now >= deadline:
            return TIMEOUT
        time.sleep(min(deadline - now, nap))
        nap = min(nap * 2, poll_s * REACH_BACKOFF)
