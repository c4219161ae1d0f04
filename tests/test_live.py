"""Live consumers (rmqcore.live): the notify kernel's twins, pulls that wait, close waking them,
consumers that commit, asyncio, and followers in this process (other processes: tests/crash/
test_follow_kill.py)."""
from __future__ import annotations

import asyncio
import functools
import mmap
import os
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rmqcore import _impl, live
from rmqcore import layout as L
from rmqcore.errors import ConfigError, StoreClosedError
from rmqcore.mappedfile import PooledMappedFile
from rmqcore.store import GetStatus, MessageStore
from tests.conftest import IMPLS, twins

GEOMETRY = {"commitlog_file_size": 64 * 1024, "cq_file_size": 20 * 50}
UNIT = struct.Struct(">qiq")


def _store(path: Path, impl: SimpleNamespace, **kw: Any) -> MessageStore:
    return MessageStore(path, impl=impl.name, **{**GEOMETRY, **kw})


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _flagged(k: Any, buf: Any, slot: int) -> bool:
    """A waiter flagged itself in ``slot`` (it is about to sleep, or asleep)."""
    return bool(k.load32(buf, slot + 4) == 1)


def _until(cond: Callable[[], Any], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


# -- the notify kernel (both twins) ----------------------------------------------------------------------
def test_publish_units_stores_whole_units_and_units_end_stops_at_the_first_unpublished(
        impl: SimpleNamespace) -> None:
    k = impl.notify
    buf = mmap.mmap(-1, 4096)
    units = UNIT.pack(100, 50, -7) + UNIT.pack(150, 60, 2**40)
    assert k.publish_units(buf, 40, units) == 80
    assert bytes(buf[40:80]) == units
    assert k.units_end(buf, 0, 4096) == 0  # the unit at 0 has size 0: nothing is published from there
    assert k.units_end(buf, 40, 4096) == 80
    assert k.units_end(buf, 40, 70) == 60  # only whole units below the stop
    with pytest.raises(ValueError):
        k.publish_units(buf, 4090, units)  # past the end: nothing written
    with pytest.raises(ValueError):
        k.publish_units(buf, 40, units[:30])  # not whole units
    assert bytes(buf[4080:]) == bytes(16)
    with pytest.raises(ValueError):
        k.publish_units(bytes(100), 0, units[:20])  # read-only
    with pytest.raises(ValueError):
        k.units_end(buf, 0, 5000)


@given(st.lists(st.tuples(st.integers(0, 2**62), st.integers(1, 2**31 - 1), st.integers(-(2**63), 2**63 - 1)),
                max_size=20))
def test_publish_units_twins_write_the_same_bytes(units: list[tuple[int, int, int]]) -> None:
    data = b"".join(UNIT.pack(*u) for u in units)
    got = []
    for name in IMPLS:
        k = _impl.kernel("notify", name)
        buf = bytearray(8 + len(data) + 20)
        k.publish_units(buf, 8, data)
        got.append(bytes(buf))
        assert k.units_end(buf, 8, len(buf)) == 8 + len(data)
    assert all(g == got[0] for g in got)
    assert got[0][8 : 8 + len(data)] == data


def test_header_words_round_trip_and_are_checked(impl: SimpleNamespace) -> None:
    k = impl.notify
    buf = mmap.mmap(-1, 64)
    k.store64(buf, 8, -5)
    k.store32(buf, 4, 2**32 + 7)
    assert (k.load64(buf, 8), k.load32(buf, 4)) == (-5, 7)
    bad: list[Callable[[], Any]] = [lambda: k.load64(buf, 12), lambda: k.load64(buf, 60),
                                    lambda: k.store32(buf, 2, 1), lambda: k.load32(buf, -4)]
    for call in bad:
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError):
        k.store64(bytes(16), 0, 1)


def test_bump_wakes_a_flagged_waiter_and_waits_end_on_timeout_and_cancel(impl: SimpleNamespace) -> None:
    k = impl.notify
    buf = mmap.mmap(-1, 4096)
    cancel = np.zeros(1, dtype=np.int64)
    assert k.wait(buf, 64, 0, 0.01, cancel) == k.TIMEOUT
    assert k.load32(buf, 68) == 1  # the waiter flagged itself
    t, out = _in_thread(lambda: k.wait(buf, 64, k.seq(buf, 64), 60.0, cancel))
    _until(lambda: k.load32(buf, 68) == 1 and t.is_alive())
    time.sleep(0.05)
    assert k.bump(buf, 64) == 1
    t.join(30)
    assert out == {"result": k.CHANGED}
    assert k.load32(buf, 68) == 0  # cleared by the bump that woke it
    assert k.wait(buf, 64, 0, 60.0, cancel) == k.CHANGED  # already moved on: no sleep at all
    t, out = _in_thread(lambda: k.wait(buf, 64, 1, 60.0, cancel))
    _until(lambda: k.load32(buf, 68) == 1)
    time.sleep(0.05)
    cancel[0] = 1
    k.wake(buf, 64)
    t.join(30)
    assert out == {"result": k.CANCELLED}
    ro = mmap.mmap(-1, 4096, prot=mmap.PROT_READ)
    with pytest.raises(ValueError):
        k.wait(ro, 64, 0, 0.01, None, True)  # a read-only map cannot be flagged
    assert k.wait(ro, 64, 0, 0.01, None, False, 0.001) == k.TIMEOUT


def test_wait_reach_ends_when_the_word_reaches_its_target_on_cancel_and_on_timeout(
        impl: SimpleNamespace) -> None:
    """``wait_reach``: what the warm-ahead threads wait on (the CommitLog's live end), without a futex."""
    k = impl.notify
    word = np.zeros(2, dtype=np.int64)
    cancel = np.zeros(1, dtype=np.int64)
    t0 = time.monotonic()
    assert k.wait_reach(word, 8, 5, 0.05, cancel, 0.001) == k.TIMEOUT
    assert time.monotonic() - t0 >= 0.05
    word[1] = 5
    assert k.wait_reach(word, 8, 5, 60.0, cancel) == k.CHANGED  # reached already: no sleep
    assert k.wait_reach(bytes(word.tobytes()), 8, -1, 60.0) == k.CHANGED  # a read-only buffer will do
    t, out = _in_thread(lambda: k.wait_reach(word, 8, 1000, 60.0, cancel, 0.001))
    time.sleep(0.05)
    word[1] = 999
    time.sleep(0.05)
    assert t.is_alive()  # 999 is not 1000
    word[1] = 1000
    t.join(30)
    assert out == {"result": k.CHANGED}
    t, out = _in_thread(lambda: k.wait_reach(word, 8, 2000, 60.0, cancel, 0.001))
    time.sleep(0.05)
    cancel[0] = 1
    t.join(30)
    assert out == {"result": k.CANCELLED}
    assert k.REACH_BACKOFF == 16  # an idle word is looked at every 16 poll_s at most: the twins agree
    cancel[0] = 0
    t0 = time.monotonic()  # a word that stops moving: looked at often, then less; the answer is the same
    t, out = _in_thread(lambda: k.wait_reach(word, 8, 5000, 60.0, cancel, 0.001))
    for v in range(1001, 1011):
        word[1] = v
        time.sleep(0.003)
    time.sleep(0.1)
    word[1] = 5000
    t.join(30)
    assert out == {"result": k.CHANGED} and time.monotonic() - t0 < 10
    for call in (lambda: k.wait_reach(word, 4, 0, 0.01), lambda: k.wait_reach(word, 16, 0, 0.01),
                 lambda: k.wait_reach(word, 0, 0, 0.01, np.zeros(2, dtype=np.int64))):
        with pytest.raises(ValueError):
            call()


def test_a_wait_that_spins_first_ends_as_a_plain_wait(impl: SimpleNamespace) -> None:
    """``spin_s`` (NotifyFile.wait_spin): the native twin spins on the slot before it sleeps, the pure
    one sleeps at once; the answers are the same: a bump during the spin, a deadline before the
    spin's end, a cancel during the spin."""
    k = impl.notify
    buf = mmap.mmap(-1, 4096)
    cancel = np.zeros(1, dtype=np.int64)
    assert k.wait(buf, 64, 0, 0.01, cancel, True, 0.0, 30.0) == k.TIMEOUT  # the spin ends at the deadline
    t, out = _in_thread(lambda: k.wait(buf, 64, 0, 60.0, cancel, True, 0.0, 30.0))
    time.sleep(0.05)
    assert k.bump(buf, 64) == 1
    t.join(30)
    assert out == {"result": k.CHANGED}
    t, out = _in_thread(lambda: k.wait(buf, 64, 1, 60.0, cancel, True, 0.0, 30.0))
    time.sleep(0.05)
    cancel[0] = 1
    k.wake(buf, 64)
    t.join(30)
    assert out == {"result": k.CANCELLED}


def test_notify_file_waits_spin_only_while_the_recent_waits_were_short(
        tmp_path: Path, impl: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    n = live.NotifyFile(tmp_path, writer=True, impl=impl.name)
    try:
        spins: list[float] = []
        k = n.k
        monkeypatch.setattr(n, "k", SimpleNamespace(
            CANCELLED=k.CANCELLED, waits_add=k.waits_add, poke=k.poke,
            wait=lambda *a: spins.append(a[-1]) or k.CHANGED))
        slot = n.slot("T", 0)
        n.wait(slot, 0, 1.0)
        assert spins == [0.0]  # off by default
        n.wait_spin = 1e-3
        n.wait(slot, 0, 1.0)
        assert spins[-1] == 1e-3  # the waits so far were short
        n._waited = 0.5  # as after long waits (a quiet queue)
        n.wait(slot, 0, 1.0)
        assert spins[-1] == 0.0
        assert n._waited <= 0.5 * 7 / 8 + 4e-3 / 8  # it moves toward what the waits take now
    finally:
        monkeypatch.undo()
        n.close()


def test_bump_all_moves_every_slot_as_bump_does_and_wakes_a_counted_waiter(impl: SimpleNamespace) -> None:
    """A writer's open and close (NotifyFile._bump_all): each slot's seq + 1 (wrapping) and its flag
    cleared, the bytes both twins write; a waiter that counted itself in the waits word is woken."""
    k = impl.notify
    buf = mmap.mmap(-1, 4096 + 64 * 8)
    words = np.frombuffer(buf, dtype=np.uint32)
    words[1024 + 2 * 5] = 0xFFFFFFFF  # slot 5 wraps
    words[1024 + 2 * 7 + 1] = 1  # slot 7 flagged by a waiter that is gone
    want = words.copy()
    want[1024::2] += np.uint32(1)
    want[1025::2] = 0
    k.bump_all(buf, 4096, 64, 80)
    assert words.tolist() == want.tolist()
    k.waits_add(buf, 80, 1)  # the wait counts itself, then flags itself and sleeps
    t, out = _in_thread(lambda: k.wait(buf, 4096 + 8 * 40, k.seq(buf, 4096 + 8 * 40), 60.0))
    _until(lambda: _flagged(k, buf, 4096 + 8 * 40) and t.is_alive())
    time.sleep(0.05)
    k.bump_all(buf, 4096, 64, 80)
    t.join(30)
    assert out == {"result": k.CHANGED}
    with pytest.raises(ValueError):
        k.bump_all(buf, 4100, 1)  # slots are 8-aligned
    with pytest.raises(ValueError):
        k.bump_all(buf, 4096, 65)  # past the buffer
    del words


def test_a_waiter_of_one_twin_is_woken_by_the_other(tmp_path: Path) -> None:
    impls = twins()
    path = tmp_path / "words"
    path.write_bytes(bytes(4096))
    for waiter, bumper in ((impls[0].notify, impls[-1].notify), (impls[-1].notify, impls[0].notify)):
        with open(path, "r+b") as f1, open(path, "r+b") as f2:
            a, b = mmap.mmap(f1.fileno(), 4096), mmap.mmap(f2.fileno(), 4096)  # two maps of one file
            t, out = _in_thread(functools.partial(waiter.wait, a, 128, waiter.seq(a, 128), 60.0))
            _until(functools.partial(_flagged, bumper, b, 128))
            bumper.bump(b, 128)
            t.join(30)
            assert out == {"result": 1}
            a.close()
            b.close()


# -- publication by dispatch --------------------------------------------------------------------------
def test_dispatch_bumps_the_wake_slot_of_each_queue_that_got_units_and_no_other(
        tmp_path: Path, impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl, dispatch="inline") as s:
        n = s._notify
        assert n is not None
        q0, q1 = n.slot("T", 0), n.slot("T", 1)
        assert q0 != q1
        before = {p: n.token(p) for p in range(L.NOTIFY_SLOTS_AT, L.NOTIFY_FILE_SIZE, L.NOTIFY_SLOT_SIZE)}
        s.put("T", b"a", 0)
        s.put("T", b"b", 0)
        s.dispatch()
        after = {p: n.token(p) for p in before}
        assert [p for p in before if after[p] != before[p]] == [q0]
        s.put("T", b"c", 1)
        s.dispatch()
        assert n.token(q1) == before[q1] + 1 and n.token(q0) == after[q0]
        assert n.dispatched == s.reput_from_offset > 0
        cq = s.consume_queue("T", 0)
        assert cq is not None
        mf = cq.queue.files[0]
        assert impl.notify.units_end(mf.mm, 0, mf.file_size) == 40  # both units published by their sizes


def test_poke_bumps_only_a_flagged_slot_and_waits_add_counts_down_to_zero_at_most(
        impl: SimpleNamespace) -> None:
    k = impl.notify
    buf = mmap.mmap(-1, 4096)
    k.poke(buf, 64)
    assert k.seq(buf, 64) == 0  # nobody flagged: no bump
    assert k.wait(buf, 64, 0, 0.001) == k.TIMEOUT  # flags itself
    k.poke(buf, 64)
    assert (k.seq(buf, 64), k.load32(buf, 68)) == (1, 0)
    assert [k.waits_add(buf, 80, d) for d in (1, 1, -1, -1, -1, 1)] == [1, 2, 1, 0, 0, 1]
    for bad in (0, 2, -2):
        with pytest.raises(ValueError):
            k.waits_add(buf, 80, bad)
    with pytest.raises(ValueError):
        k.waits_add(buf, 82, 1)
    with pytest.raises(ValueError):
        k.poke(bytes(16), 0)


def test_a_put_wakes_the_reput_thread_only_while_a_reader_waits(tmp_path: Path,
                                                                 impl: SimpleNamespace) -> None:
    """Nobody waiting, a put wakes no thread (the reput thread dispatches on its timed naps, a reader
    that wants its writes dispatches them itself); a wait in progress, in this or another process,
    is counted in the notify file, and then each put wakes the reput thread at once."""
    # the periodic logics flush takes the dispatch lock (wanting it bumps the slot): not in this test
    with _store(tmp_path, impl, dispatch="auto", flush_interval_consume_queue_ms=3_600_000) as s:
        n = s._notify
        assert n is not None
        k, mm = n.k, n.mm
        s.put("T", b"first", 0)
        s.wait_dispatched()
        _until(lambda: _flagged(k, mm, L.NF_REPUT_WAKE))  # the reput thread naps on its slot
        before = k.seq(mm, L.NF_REPUT_WAKE)
        for i in range(50):
            s.put("T", b"m%d" % i, 0)
            time.sleep(0.0005)
        assert k.load32(mm, L.NF_WAITS) == 0
        assert k.seq(mm, L.NF_REPUT_WAKE) == before  # 50 puts, no wake-up
        s.wait_dispatched()
        t, out = _in_thread(lambda: s.get_messages("g", "T", 0, 51, wait=60.0))
        _until(lambda: k.load32(mm, L.NF_WAITS) == 1)  # counted, in the shared file
        _until(lambda: _flagged(k, mm, L.NF_REPUT_WAKE))
        before = k.seq(mm, L.NF_REPUT_WAKE)
        s.put("T", b"wanted", 0)
        t.join(60)
        assert k.seq(mm, L.NF_REPUT_WAKE) > before  # this put woke the reput thread
        assert [m.body for m in out["result"].messages] == [b"wanted"]
        assert k.load32(mm, L.NF_WAITS) == 0  # the wait took its count back


def test_wanting_the_dispatch_lock_ends_the_reput_threads_nap_at_once(tmp_path: Path,
                                                                      impl: SimpleNamespace) -> None:
    """A reader that wants the dispatch lock (its pull dispatches for itself) while the reput thread
    holds it in a live run, napping for the writer on its wake slot, bumps that slot: the run looks at
    ``lock_wanted`` now instead of at the end of its nap (in-process ``wait=`` pulls woken mid-run)."""
    with _store(tmp_path, impl, dispatch="auto") as s:
        n = s._notify
        assert n is not None
        before = n.k.seq(n.mm, L.NF_REPUT_WAKE)
        with s._dispatch.wanting():
            assert s._dispatch.lock_wanted[0] == 1
            assert n.k.seq(n.mm, L.NF_REPUT_WAKE) != before
        assert s._dispatch.lock_wanted[0] == 0


def test_the_notify_file_says_what_the_writer_is_doing(tmp_path: Path, impl: SimpleNamespace) -> None:
    s = _store(tmp_path, impl)
    n = live.NotifyFile.for_follower(tmp_path)
    assert n is not None
    assert (n.state, n.generation, n.pid) == (L.NOTIFY_STATE_OPEN, 1, os.getpid())
    s.close()
    assert n.state == L.NOTIFY_STATE_CLOSED
    _store(tmp_path, impl).close()
    assert n.generation == 2
    n.close()
    assert live.NotifyFile.for_follower(tmp_path / "nowhere") is None


# -- pulls that wait ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dispatch", ["auto", "background"])
def test_a_waiting_pull_returns_the_message_dispatch_publishes(tmp_path: Path, impl: SimpleNamespace,
                                                               dispatch: str) -> None:
    with _store(tmp_path, impl, dispatch=dispatch) as s:
        s.put("T", b"first", 0)
        s.wait_dispatched()
        t, out = _in_thread(lambda: s.get_messages("g", "T", 0, 1, wait=60.0))
        slot = s._notify.slot("T", 0)  # type: ignore[union-attr]
        _until(lambda: s._notify._waiting.get(slot, 0) == 1)  # type: ignore[union-attr]
        s.put("T", b"second", 0)
        t.join(60)
        r = out["result"]
        assert r.status == GetStatus.FOUND  # (after 60 s it would be OFFSET_OVERFLOW_ONE)
        assert [m.body for m in r.messages] == [b"second"]
        assert r.next_begin_offset == 2


def test_a_wait_on_a_queue_that_does_not_exist_yet_ends_when_it_does(tmp_path: Path,
                                                                      impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl) as s:
        t, out = _in_thread(lambda: s.get_messages("g", "New", 3, 0, wait=60.0))
        _until(lambda: s._notify._inside == 1)  # type: ignore[union-attr]
        s.put("New", b"x", 3)
        t.join(60)
        assert out["result"].status == GetStatus.FOUND


def test_a_wait_that_finds_nothing_returns_the_held_status(tmp_path: Path, impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl) as s:
        s.put("T", b"x", 0)
        r = s.get_messages("g", "T", 0, 1, wait=0.05)
        assert (r.status, r.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_ONE, 1)
        assert s.get_messages("g", "T", 5, 0, wait=0.01).status == GetStatus.NO_MATCHED_LOGIC_QUEUE
        r = s.get_messages("g", "T", 0, 0, wait=5.0)  # something there: no wait at all
        assert r.status == GetStatus.FOUND


@pytest.mark.parametrize("bad", [-1, float("nan"), "1", None, True])
def test_a_bad_wait_is_a_config_error(tmp_path: Path, impl: SimpleNamespace, bad: Any) -> None:
    with _store(tmp_path, impl) as s:
        with pytest.raises(ConfigError):
            s.get_messages("g", "T", 0, 0, wait=bad)


def test_a_wait_ends_on_the_put_that_publishes_its_unit(tmp_path: Path, impl: SimpleNamespace) -> None:
    """No reput thread under ``dispatch="put"``: the put publishes its unit and wakes the waiter."""
    with _store(tmp_path, impl, dispatch="put") as s:
        s.put("T", b"x", 0)
        t, out = _in_thread(functools.partial(s.get_messages, "g", "T", 0, 1, wait=60.0))
        _until(lambda: s._notify._inside == 1)  # type: ignore[union-attr]
        t0 = time.monotonic()
        s.put("T", b"y", 0)
        t.join(30)
        assert time.monotonic() - t0 < 30
        r = out["result"]
        assert r.status == GetStatus.FOUND and [m.body for m in r.messages] == [b"y"]


def test_waiting_where_nothing_could_end_it_is_a_config_error(tmp_path: Path, impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl, dispatch="inline") as s:
        s.put("T", b"x", 0)
        with pytest.raises(ConfigError, match="inline"):
            s.get_messages("g", "T", 0, 1, wait=1.0)
        assert s.get_messages("g", "T", 0, 0).status == GetStatus.FOUND
    with MessageStore(tmp_path, read_only=True, impl=impl.name) as ro:
        with pytest.raises(ConfigError, match="follow=True"):
            ro.get_messages("g", "T", 0, 1, wait=1.0)
    with pytest.raises(ConfigError):
        MessageStore(tmp_path, follow=True, impl=impl.name)


def test_close_wakes_every_waiter_with_store_closed_error(tmp_path: Path, impl: SimpleNamespace) -> None:
    s = _store(tmp_path, impl)
    s.put("T", b"x", 0)
    waits = [_in_thread(functools.partial(s.get_messages, "g", "T", q, 1 if q == 0 else 0, wait=600.0))
             for q in range(4)]
    _until(lambda: s._notify._inside == 4)  # type: ignore[union-attr]
    s.close()
    for t, out in waits:
        t.join(30)
        assert not t.is_alive()
        assert isinstance(out.get("error"), StoreClosedError)
    with pytest.raises(StoreClosedError):
        s.get_messages("g", "T", 0, 1, wait=1.0)


# -- consumers -------------------------------------------------------------------------------------------
def test_consume_yields_in_order_and_commits_what_was_consumed(tmp_path: Path, impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl) as s:
        for i in range(10):
            s.put("T", b"m%d" % i, 0)
        got = []
        with s.consume("g", "T", 0, from_where="first", batch_size=3, commit_interval=3600,
                       timeout=0.05) as c:
            for m in c:
                got.append(m.body)
                if len(got) == 4:
                    break  # leaving `with` normally: the fourth message was handled
        assert got == [b"m0", b"m1", b"m2", b"m3"]
        assert s.fetch_offset("g", "T", 0) == 4
        with pytest.raises(RuntimeError), s.consume("g", "T", 0, timeout=0.05) as c:
            for m in c:
                assert m.body == b"m4"
                raise RuntimeError("handling failed")  # m4 is not consumed
        assert s.fetch_offset("g", "T", 0) == 4
        with s.consume("g", "T", 0, timeout=0.05, commit_interval=0) as c:
            assert [m.body for m in c] == [b"m%d" % i for i in range(4, 10)]  # ends after 0.05 s of nothing
            assert s.fetch_offset("g", "T", 0) == 10  # committed once the pulls' messages were consumed
        s.put("T", b"late", 0)
        # a new group starts at the end (CONSUME_FROM_LAST_OFFSET)
        with s.consume("g2", "T", 0, timeout=0.05) as c:
            assert list(c) == []
        assert s.fetch_offset("g2", "T", 0) == 11


def test_consume_waits_for_new_messages_and_close_commits_its_progress(tmp_path: Path,
                                                                       impl: SimpleNamespace) -> None:
    s = _store(tmp_path, impl)
    s.put("T", b"m0", 0)
    c = s.consume("g", "T", 0, from_where="first", commit_interval=3600)
    seen: list[bytes] = []

    def run() -> None:
        for m in c:
            seen.append(m.body)

    t, out = _in_thread(run)
    _until(lambda: seen == [b"m0"])
    s.put("T", b"m1", 0)
    _until(lambda: seen == [b"m0", b"m1"])
    _until(lambda: s._notify._inside == 1)  # type: ignore[union-attr]  # m1 consumed: waiting for more
    s.close()
    t.join(30)
    assert isinstance(out.get("error"), StoreClosedError)
    with MessageStore(tmp_path, read_only=True, impl=impl.name) as ro:
        assert ro.fetch_offset("g", "T", 0) == 2


def test_consume_corrects_an_offset_the_queue_no_longer_has(tmp_path: Path, impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl) as s:
        for i in range(3):
            s.put("T", b"m%d" % i, 0)
        s.commit_offset("g", "T", 0, 99)  # past the end (PULL_OFFSET_MOVED)
        with s.consume("g", "T", 0, timeout=0.05) as c:
            assert list(c) == []
        assert s.fetch_offset("g", "T", 0) == 3


# -- asyncio ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_a_durable_ack_is_awaitable(tmp_path: Path, impl: SimpleNamespace, flush: str) -> None:
    with _store(tmp_path, impl, flush_disk_type=flush) as s:
        async def main() -> Any:
            return await s.put_async("T", b"x", 0)

        r = asyncio.run(main())
        assert (r.physical_offset, r.queue_offset) == (0, 0)


def test_consume_async_gets_messages_without_blocking_the_loop(tmp_path: Path, impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl) as s:
        loop_threads: set[int] = set()
        pull_threads: set[int] = set()
        real = s.get_messages

        def spy(*a: Any, **k: Any) -> Any:
            pull_threads.add(threading.get_ident())
            return real(*a, **k)

        s.get_messages = spy  # type: ignore[method-assign]

        async def main() -> tuple[list[bytes], float]:
            loop_threads.add(threading.get_ident())
            gaps = [0.0]

            async def ticker() -> None:
                last = time.monotonic()
                while True:
                    await asyncio.sleep(0.01)
                    now = time.monotonic()
                    gaps.append(now - last)
                    last = now

            tick = asyncio.create_task(ticker())
            got: list[bytes] = []
            loop = asyncio.get_running_loop()
            loop.call_later(0.6, lambda: s.put("T", b"late", 0))
            async with s.consume_async("g", "T", 0, from_where="first", timeout=5.0) as c:
                async for m in c:
                    got.append(m.body)
                    if len(got) == 2:
                        break
            tick.cancel()
            return got, max(gaps)

        s.put("T", b"early", 0)
        got, gap = asyncio.run(main())
        assert got == [b"early", b"late"]
        assert s.fetch_offset("g", "T", 0) == 2
        assert pull_threads and not (pull_threads & loop_threads)  # every pull ran off the loop's thread
        assert gap < 0.4  # the ticker kept running while the consumer waited 0.6 s for "late"


# -- followers in this process -----------------------------------------------------------------------
def _follower(path: Path, impl: SimpleNamespace) -> MessageStore:
    return MessageStore(path, read_only=True, follow=True, impl=impl.name)


def test_a_follower_sees_records_units_and_queues_published_after_its_open(tmp_path: Path,
                                                                         impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl, commitlog_file_size=32 * 1024) as w:
        w.put("T", b"before", 0)
        w.wait_dispatched()
        with _follower(tmp_path, impl) as f:
            assert f.max_offset("T", 0) == 1
            for i in range(300):  # several CommitLog and consume-queue files (rolls)
                w.put("T", b"%05d" % i + b"x" * 300, 0)
            w.put("U", b"new queue", 2)
            w.wait_dispatched()
            assert len(w.commitlog.queue.files) > 2
            assert f.max_offset("T", 0) == 301
            bodies, off = [], 1
            while off < 301:
                r = f.get_messages("g", "T", 0, off, 32)
                assert r.status == GetStatus.FOUND
                bodies += [m.body[:5] for m in r.messages]
                off = r.next_begin_offset
            assert bodies == [b"%05d" % i for i in range(300)]
            assert [m.body for m in f.get_messages("g", "U", 2, 0).messages] == [b"new queue"]


def test_a_follower_wait_is_woken_by_the_writers_dispatch(tmp_path: Path, impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl) as w:
        w.put("T", b"a", 0)
        with _follower(tmp_path, impl) as f:
            t, out = _in_thread(lambda: f.get_messages("g", "T", 0, 1, wait=60.0))
            _until(lambda: f._follower.waits._inside == 1)  # type: ignore[union-attr]
            w.put("T", b"b", 0)
            t.join(60)
            assert [m.body for m in out["result"].messages] == [b"b"]
            t, out = _in_thread(lambda: f.get_messages("g", "T", 0, 2, wait=600.0))
            _until(lambda: f._follower.waits._inside == 1)  # type: ignore[union-attr]
        t.join(30)  # the follower's own close ends its waits
        assert isinstance(out.get("error"), StoreClosedError)


def test_a_follower_keeps_up_with_retention_and_a_writer_restart(tmp_path: Path,
                                                                  impl: SimpleNamespace) -> None:
    w = _store(tmp_path, impl)
    for i in range(200):
        w.put("T", b"%05d" % i + b"y" * 300, 0)
    w.wait_dispatched()
    f = _follower(tmp_path, impl)
    try:
        assert f.max_offset("T", 0) == 200
        deleted = w.clean_expired(force=True, now_ms=2**62)
        assert deleted
        lo = f.min_offset("T", 0)
        assert lo == w.min_offset("T", 0) > 0
        assert all(os.path.exists(mf.path) for mf in f.commitlog.queue.files)
        assert f.get_messages("g", "T", 0, 0).status == GetStatus.OFFSET_TOO_SMALL
        w.close()
        w = _store(tmp_path, impl)  # a restart: recovery, then new messages
        w.put("T", b"after restart", 0)
        r = f.get_messages("g", "T", 0, 200, wait=30.0)
        assert [m.body for m in r.messages] == [b"after restart"]
        assert f._follower.gen == 2  # type: ignore[union-attr]
        assert [m.body[:5] for m in f.get_messages("g", "T", 0, 199).messages][:1] == [b"00199"]
    finally:
        f.close()
        w.close()


def test_a_follower_with_a_small_map_pool_reads_every_queue_across_rolls_and_a_restart(
        tmp_path: Path, impl: SimpleNamespace) -> None:
    """More queues than the follower may map at once (max_open_queue_files=2): the maps the pool
    lets go are made again, by path, after the writer rolled the queues' files and restarted."""
    queues = range(6)
    w = _store(tmp_path, impl)
    for i in range(30):
        for q in queues:
            w.put("P", b"%d-%03d" % (q, i), q)
    w.wait_dispatched()
    f = MessageStore(tmp_path, read_only=True, follow=True, impl=impl.name, max_open_queue_files=2)
    try:
        got: dict[int, list[bytes]] = {q: [] for q in queues}

        def drain(total: int) -> None:
            for q in queues:
                while len(got[q]) < total:
                    r = f.get_messages("g", "P", q, len(got[q]), 32, wait=30.0)
                    assert r.status == GetStatus.FOUND, (q, len(got[q]), r.status)
                    got[q] += [m.body for m in r.messages]

        drain(30)
        assert f._map_pool.mapped <= 2
        for i in range(30, 130):  # each queue's 50-unit files roll twice more
            for q in queues:
                w.put("P", b"%d-%03d" % (q, i), q)
        drain(130)
        w.close()
        w = _store(tmp_path, impl)  # a restart: recovery re-dispatches the tail, rolls go on
        for i in range(130, 180):
            for q in queues:
                w.put("P", b"%d-%03d" % (q, i), q)
        drain(180)
        assert f._map_pool.reopened > 0  # maps were let go and made again
        files = [mf for cq in f.consume_queues.values() for mf in cq.queue.files]
        assert len(files) >= 6 * 4  # every queue rolled; each file is the pool's, within its budget
        assert all(isinstance(mf, PooledMappedFile) for mf in files)
        assert f._map_pool.mapped <= 2
        assert got == {q: [b"%d-%03d" % (q, i) for i in range(180)] for q in queues}
    finally:
        f.close()
        w.close()


def test_a_follower_pull_while_the_writer_recovers_finds_nothing_new(tmp_path: Path,
                                                                     impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl) as w:
        w.put("T", b"x", 0)
        w.wait_dispatched()
        with _follower(tmp_path, impl) as f:
            n = w._notify
            assert n is not None
            n.begin()  # what a restarted writer says before it touches a file
            r = f.get_messages("g", "T", 0, 0)
            assert (r.status, r.next_begin_offset, r.physical_offsets) == (
                GetStatus.OFFSET_OVERFLOW_ONE, 0, [])
            n.opened(w.reput_from_offset, w.commitlog.min_offset)
            assert f.get_messages("g", "T", 0, 0).status == GetStatus.FOUND


def test_a_followers_commits_reach_the_writer_which_owns_the_offsets(tmp_path: Path,
                                                                     impl: SimpleNamespace) -> None:
    w = _store(tmp_path, impl)
    w.put("T", b"x", 0)
    with _follower(tmp_path, impl) as f:
        w.commit_offset("g", "T", 0, 1)
        f.commit_offset("g", "T", 0, 5)
        f.commit_offset("g", "T", 1, 7)
        assert f.fetch_offset("g", "T", 0) == 5  # the follower reads its own commits back
        assert w.fetch_offset("g", "T", 0) == 5  # and the writer applies them first
        assert w.fetch_offset("g", "T", 1) == 7
        assert not (tmp_path / "config" / L.OFFSET_INBOX_FILE).read_bytes()  # applied: the inbox is empty
        w.commit_offset("g", "T", 0, 6)  # a later commit of the writer wins
        assert f.fetch_offset("g", "T", 0) == 6
        f.commit_offset("g", "T", 0, 8)
    w.close()  # applied at close too
    with MessageStore(tmp_path, read_only=True, impl=impl.name) as ro:
        assert ro.fetch_offset("g", "T", 0) == 8
    f2 = _follower(tmp_path, impl)
    f2.commit_offset("g", "T", 0, 9)  # no writer running: it waits in the inbox ...
    f2.close()
    with _store(tmp_path, impl) as w2:  # ... for the next writer's open
        assert w2._meta.offsets["T@g"][0] == 9


def test_a_torn_inbox_line_is_dropped_with_a_warning(tmp_path: Path, impl: SimpleNamespace) -> None:
    from rmqcore.errors import RecoveryCutWarning

    _store(tmp_path, impl).close()
    inbox = tmp_path / "config" / L.OFFSET_INBOX_FILE
    inbox.parent.mkdir(exist_ok=True)
    inbox.write_bytes(b'{"T@g": {"0": 3}}\n{"T@g": {"0"')  # a commit a power loss cut short
    with _follower(tmp_path, impl) as f:
        f.commit_offset("g", "T", 0, 4)  # ends the torn line first
    with pytest.warns(RecoveryCutWarning, match="byte 18"):
        with _store(tmp_path, impl) as w:
            assert w.fetch_offset("g", "T", 0) == 4


def test_a_follower_without_a_notify_file_polls(tmp_path: Path, impl: SimpleNamespace) -> None:
    with _store(tmp_path, impl) as w:
        w.put("T", b"a", 0)
        w.wait_dispatched()
        os.unlink(tmp_path / L.NOTIFY_FILE)  # as a store a RocketMQ broker writes
        with _follower(tmp_path, impl) as f:
            assert f._follower.notify is None  # type: ignore[union-attr]
            t, out = _in_thread(lambda: f.get_messages("g", "T", 0, 1, wait=60.0))
            time.sleep(0.05)
            for i in range(100):
                w.put("T", b"b%d" % i + b"z" * 400, 0)
            t.join(60)
            assert out["result"].status == GetStatus.FOUND
            w.wait_dispatched()
            bodies, off = [], 1
            while off < 101:
                r = f.get_messages("g", "T", 0, off, 32, wait=30.0)
                bodies += [m.body[:4].rstrip(b"z") for m in r.messages]
                off = r.next_begin_offset
            assert bodies == [b"b%d" % i for i in range(100)]


def test_the_follower_accepts_a_broker_unit_only_when_its_record_says_so(tmp_path: Path,
                                                                        impl: SimpleNamespace) -> None:
    """Without a notify file the units carry no order: one whose record is not (yet) there, or names
    another queue offset, is not published."""
    with _store(tmp_path, impl) as w:
        for i in range(3):
            w.put("T", b"m%d" % i, 0)
        w.wait_dispatched()
        os.unlink(tmp_path / L.NOTIFY_FILE)
        with _follower(tmp_path, impl) as f:
            cq = f.consume_queue("T", 0)
            assert cq is not None
            mf = cq.queue.files[0]
            fl = f._follower
            assert fl is not None
            mf.wrote_position = 20
            assert fl._checked_end(cq, mf) == 60
            wm = w.consume_queue("T", 0).queue.files[0].mm  # type: ignore[union-attr]
            off, size, tags = UNIT.unpack_from(wm, 20)
            wm[20:40] = UNIT.pack(off, size + 1, tags)  # the record's size disagrees
            assert fl._checked_end(cq, mf) == 20
            wm[20:40] = UNIT.pack(off + 10**6, size, tags)  # past the CommitLog's end
            assert fl._checked_end(cq, mf) == 20
            wm[20:40] = UNIT.pack(off, size, tags)
            assert fl._checked_end(cq, mf) == 60


# -- publish-on-put (dispatch="put") -----------------------------------------------------------------------
def _derived_files(root: Path) -> list[tuple[str, bytes]]:
    """Consume-queue files by path, index files in order (their names are wall-clock times)."""
    cqs = sorted((str(p.relative_to(root)), p.read_bytes()) for p in (root / "consumequeue").rglob("*")
                 if p.is_file())
    index = [("index", p.read_bytes()) for p in sorted((root / "index").iterdir())]
    return cqs + index


def test_each_put_publishes_its_record_to_a_follower_and_writes_the_files_dispatch_writes(
        tmp_path: Path, impl: SimpleNamespace) -> None:
    """Under ``dispatch="put"`` a follower sees every put at once, the writer making no dispatch
    call and no read, across new queues, consume-queue, index and CommitLog file rolls (the
    records the armed Dispatcher declines, the put dispatches itself); the consume-queue and
    index files are byte for byte those ``dispatch="inline"`` writes for the same puts."""
    clock = [1_700_000_000_000]
    geom = dict(commitlog_file_size=16 * 1024, cq_file_size=20 * 40, index_slots=11, index_entries=150,
                index_interval_bytes=512, clock=lambda: clock[0])
    model: dict[tuple[str, int], list[bytes]] = {}
    with _store(tmp_path / "put", impl, dispatch="put", **geom) as w, \
            _store(tmp_path / "inline", impl, dispatch="inline", **geom) as ref:
        w.put("T", b"first", 0)
        ref.put("T", b"first", 0)
        model[("T", 0)] = [b"first"]
        with _follower(tmp_path / "put", impl) as f:
            for i in range(400):
                clock[0] += i % 3
                topic, q = ("T", "U")[i % 2], i % 3
                body = b"%04d" % i + b"z" * (i % 97)
                for s in (w, ref):
                    s.put(topic, body, q, keys=f"k{i} j{i % 7}", tags=f"t{i % 4}")
                lst = model.setdefault((topic, q), [])
                lst.append(body)
                if i % 37 == 0:  # the follower sees it now: the writer made no call but the puts
                    r = f.get_messages("g", topic, q, len(lst) - 1, 1)
                    assert [m.body for m in r.messages] == [body]
            assert w.dispatch_lag == 0  # published by the puts ...
            assert w._dispatch.reput_from_offset < w.commitlog.max_offset  # ... not by a dispatch call
            assert len(w.commitlog.queue.files) > 3
            for (topic, q), bodies in model.items():
                got, off = [], 0
                while off < len(bodies):
                    r = f.get_messages("g", topic, q, off, 32)
                    assert r.status == GetStatus.FOUND
                    got += [m.body for m in r.messages]
                    off = r.next_begin_offset
                assert got == bodies
            assert [m.body for m in w.query_by_key("U", "k399")] == [model[("U", 0)][-1]]
    assert _derived_files(tmp_path / "put") == _derived_files(tmp_path / "inline")
    assert len([n for n, _ in _derived_files(tmp_path / "put") if n == "index"]) > 1


def test_a_record_whose_keys_fill_the_index_file_mid_record_is_indexed_once(
        tmp_path: Path, impl: SimpleNamespace) -> None:
    """Index files of 6 entries and records of 4 keys: a publish stops inside a record's keys (the
    first record after the Dispatcher was armed among them); the put's own dispatch goes on from the
    next key, so each key is in the index once, as ``dispatch="inline"`` writes it."""
    clock = [1_700_000_000_000]
    geom = dict(index_slots=5, index_entries=7, clock=lambda: clock[0])
    for mode in ("put", "inline"):
        with _store(tmp_path / mode, impl, dispatch=mode, **geom) as s:
            for i in range(60):
                s.put("T", b"m%d" % i, i % 10, keys=f"a{i} b{i} c{i} d{i}")
            for i in (0, 7, 31, 59):
                for k in "abcd":
                    assert [m.body for m in s.query_by_key("T", f"{k}{i}")] == [b"m%d" % i]
    assert _derived_files(tmp_path / "put") == _derived_files(tmp_path / "inline")
