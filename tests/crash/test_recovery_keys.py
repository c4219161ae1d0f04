"""Keys after a crash, whatever the clock did: hypothesis drives puts with the store clock stepping
forward and back (NTP), across CommitLog and index-file rolls (tiny geometry), then "kills" the store
at a random point: the files are copied as they are while it is open (what a SIGKILL leaves: the page
cache, the abort file, no close), sometimes with the last record torn or a recent body bit flipped.
Recovery of the copy must keep an exact prefix of the puts, find every UNIQ_KEY and KEYS token of
every message it kept that RocketMQ indexes (rolled-back transaction messages are not), never answer
with a record it cut, and index what is put afterwards. (Real SIGKILLs: test_kill9.py.)"""
from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rmqcore import layout as L
from rmqcore.errors import RecoveryCutWarning
from rmqcore.message import MessageExt
from rmqcore.store import MessageStore

FILE = 8192
GEOM = dict(commitlog_file_size=FILE, cq_file_size=400, index_slots=17, index_entries=20)
# no periodic flush thread in the way: the checkpoint moves when the test flushes
QUIET = dict(dispatch="inline", flush_interval_consume_queue_ms=10**9, flush_interval_ms=10**9)
T0 = 1_700_000_000_000

step = st.one_of(st.integers(0, 1500), st.integers(-30_000, 30_000))  # ticks, and NTP's jumps either way
op = st.tuples(
    st.sampled_from(["put"] * 5 + ["rollback", "prepared", "dispatch", "dispatch", "flush"]),
    step, st.integers(0, 3), st.integers(0, 300))
damage = st.sampled_from(["none", "none", "torn", "flip"])


def _put(s: MessageStore, i: int, kind: str, nkeys: int, pad: int) -> tuple[int, int, list[str]]:
    keys = [f"k{i}-{j}" for j in range(nkeys)]
    sys_flag = {"rollback": L.TRANSACTION_ROLLBACK, "prepared": L.TRANSACTION_PREPARED}.get(kind, 0)
    props = {"UNIQ_KEY": f"U{i:05d}"}
    r = s.put("T", b"m%05d" % i + b"." * pad, i % 3, keys=keys or None, properties=props, sys_flag=sys_flag)
    return r.physical_offset, r.size, [f"U{i:05d}", *keys] if kind != "rollback" else []


# the two cases issue 22 found, always tried: the clock steps back 20 s between index rolls (RocketMQ's
# time rule deleted a file from the middle), and a flip in the last file cuts below indexed records
_CLOCK_BACK = [("put", -20_000 if i == 20 else 100, 1, 0) for i in range(40)] + [("dispatch", 0, 0, 0)]
_CUT = [("put", 100, 2, 100) for _ in range(60)] + [("dispatch", 0, 0, 0)]


@pytest.mark.crash
@example(ops=_CLOCK_BACK, kill_at=1.0, damage="none", where=0)
@example(ops=_CUT, kill_at=1.0, damage="flip", where=5)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=5, max_size=160), kill_at=st.floats(0, 1), damage=damage,
       where=st.integers(0, 10**6))
def test_every_key_of_every_surviving_message_is_found_after_a_crash(tmp_path_factory, impl, ops, kill_at,
                                                                     damage, where) -> None:
    live, crash = tmp_path_factory.mktemp("live"), tmp_path_factory.mktemp("crash")
    try:
        _run(live, crash / "s", impl.name, ops, kill_at, damage, where)
    finally:
        shutil.rmtree(live)
        shutil.rmtree(crash)


def _run(live: Path, copy: Path, impl: str, ops: list, kill_at: float, damage: str, where: int) -> None:
    clock = [T0]
    puts: list[tuple[int, int, list[str]]] = []  # (offset, size, indexed keys) in put order
    kill = int(kill_at * len(ops))
    s = MessageStore(live, impl=impl, clock=lambda: clock[0], **GEOM, **QUIET)
    try:
        for n, (kind, dt, nkeys, pad) in enumerate(ops):
            if n == kill:
                shutil.copytree(live, copy)  # the kill: what the files hold now
            clock[0] += dt
            if kind == "dispatch":
                s.dispatch()
            elif kind == "flush":
                s.flush()
            else:
                puts.append(_put(s, len(puts), kind, nkeys, pad))
        if kill >= len(ops):
            shutil.copytree(live, copy)
    finally:
        s.close()
    assert (copy / "abort").exists()
    n_before = sum(1 for o in ops[:kill] if o[0] not in ("dispatch", "flush"))
    puts = puts[:n_before]
    lost_from = len(puts)  # the first put recovery must not keep
    if puts and damage != "none":
        if damage == "torn":  # the last record's write was cut short
            off, size, _ = puts[-1]
            at, lost_from = off + where % size, len(puts) - 1
            zero_to = off - off % FILE + FILE
        else:  # a body bit of one of the last records flipped (in the last file: recovery scans it)
            last_file = puts[-1][0] - puts[-1][0] % FILE
            mine = [k for k, (o, _, _) in enumerate(puts) if o >= last_file]
            k = mine[-1 - where % len(mine)]
            off, size, _ = puts[k]
            at, lost_from, zero_to = off + 88, k, -1
        f = copy / "commitlog" / L.offset_to_file_name(off - off % FILE)
        b = bytearray(f.read_bytes())
        if zero_to < 0:
            b[at % FILE] ^= 0x04
        else:
            b[at % FILE : zero_to - off + off % FILE] = bytes(zero_to - at)
        f.write_bytes(bytes(b))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecoveryCutWarning)  # a flip in the middle cuts valid records
        s = MessageStore(copy, impl=impl, clock=lambda: clock[0], **GEOM, **QUIET)
    with s:
        end = s.commitlog.max_offset
        kept = [m.position for m in s.commitlog.iter_records(verify_crc=True) if isinstance(m, MessageExt)]
        assert kept == [off for off, _, _ in puts[:lost_from]]
        for off, _, keys in puts[:lost_from]:
            for key in keys:
                assert [m.position for m in s.query_by_key("T", key)] in ([off], [off, off]), (key, off)
        for off, _, keys in puts[lost_from:]:
            for key in keys:
                assert s.query_by_key("T", key) == [] and s.lookup("T", key) is None, (key, off)
        assert all(o < end for o in s.query_offsets("T", "U00000"))
        clock[0] -= 5000  # and what is put after recovery is indexed, clock stepping or not
        r = s.put("T", b"after", 0, keys="after-crash")
        assert [m.position for m in s.query_by_key("T", "after-crash")] == [r.physical_offset]
