"""A bit flip in a stored body (or in the fields that frame a record) is detected and never served."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmqcore import layout as L
from rmqcore.commitlog import ScanStop
from rmqcore.errors import ChecksumError, CorruptionError
from rmqcore.message import MessageExt
from rmqcore.store import MessageStore
from rmqcore.verify import verify_store

GEOM = dict(commitlog_file_size=16384, cq_file_size=400, index_slots=17, index_entries=100)


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list]]:
    """One written store per implementation (built on first use), shared by the examples."""
    return {}


def _base(bases: dict[str, tuple[Path, list]], tmp_path_factory: pytest.TempPathFactory,
          name: str) -> tuple[Path, list]:
    if name not in bases:
        d = tmp_path_factory.mktemp(f"flip-{name}") / "store"
        with MessageStore(d, impl=name, **GEOM) as s:
            rs = [(r.physical_offset, r.size, r.queue_offset) for r in
                  (s.put("Flip", b"payload-%04d-" % i + b"z" * (i % 50), 0, keys=f"k{i}") for i in range(60))]
        bases[name] = d, rs
    return bases[name]


@pytest.mark.crash
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_body_bit_flip_is_detected_and_never_served(bases, tmp_path_factory, impl, data) -> None:
    """Written, verified and read by each implementation (``impl`` holds no state across examples)."""
    src, rs = _base(bases, tmp_path_factory, impl.name)
    k = data.draw(st.integers(0, len(rs) - 2))  # not the last: a flip in the middle of the log
    phys, size, qoff = rs[k]
    body_len = len(b"payload-%04d-" % k) + k % 50
    body_start = phys + 88
    at = data.draw(st.integers(body_start, body_start + body_len - 1))
    bit = data.draw(st.integers(0, 7))
    work = tmp_path_factory.mktemp("w") / "s"
    shutil.copytree(src, work)
    f = work / "commitlog" / L.offset_to_file_name(at - at % 16384)
    b = bytearray(f.read_bytes())
    b[at % 16384] ^= 1 << bit
    f.write_bytes(bytes(b))
    rep = verify_store(work, impl=impl.name, **GEOM)
    assert any(p.kind == "commitlog" and p.offset == phys for p in rep.problems)
    # recovery with CRC checks (the default) ends the log before the damaged record: the queue
    # ends there too, so a pull at its offset finds nothing (and the one before it is served)
    with MessageStore(work, read_only=True, impl=impl.name, **GEOM) as s:
        assert s.commitlog.max_offset == phys
        assert s.max_offset("Flip", 0) == qoff
        r = s.get_messages("g", "Flip", 0, qoff, 1)
        status = "OFFSET_OVERFLOW_ONE" if qoff else "NO_MESSAGE_IN_QUEUE"  # RocketMQ's, at the queue's end
        assert (r.status, r.next_begin_offset, r.physical_offsets) == (status, qoff, [])
        if qoff:
            prev = s.get_messages("g", "Flip", 0, qoff - 1, 1).messages
            assert [m.position + m.size for m in prev] == [phys]
    # without them, the record is in range, and every read path refuses to serve it
    with MessageStore(work, read_only=True, impl=impl.name, check_crc_on_recover=False, **GEOM) as s:
        with pytest.raises(ChecksumError) as ei:
            s.commitlog.read(phys, verify_crc=True)
        assert ei.value.position == phys % 16384 and ei.value.path == str(f)
        walked = list(s.commitlog.iter_records(verify_crc=True))
        assert isinstance(walked[-1], ScanStop) and walked[-1].position == phys
        assert all(m.position < phys for m in walked if isinstance(m, MessageExt))
        r = s.get_messages("g", "Flip", 0, qoff, 1)
        assert (r.status, r.physical_offsets) == ("FOUND", [phys]), (r, qoff, phys)
        with pytest.raises(CorruptionError):
            _ = r.messages
