"""The columnar copy with pyarrow alone (``rmqcore materialize``): one Parquet file per sealed CommitLog
file with the records the decoder reads, incremental and idempotent reruns, stale copies detected, a
killed run that leaves only whole copies and a rerun that completes, retention removing copies with
their files, corrupt records reported with path and offset."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")
ds = pytest.importorskip("pyarrow.dataset")
pq = pytest.importorskip("pyarrow.parquet")

from rmqcore import _impl  # noqa: E402
from rmqcore.columnar import arrow as A  # noqa: E402
from rmqcore.columnar.manifest import (  # noqa: E402
    FORMAT_VERSION,
    columnar_dir,
    current_copies,
    drop_copies,
    load_manifest,
    run_lock,
    save_manifest,
    tail_dir,
)
from rmqcore import layout as L  # noqa: E402
from rmqcore.columnar.materialize import materialize  # noqa: E402
from rmqcore.columnar.stores import open_commitlog  # noqa: E402
from rmqcore.errors import ChecksumError, DirectoryNotFoundError, StoreLockedError  # noqa: E402
from rmqcore.store import MessageStore  # noqa: E402

FILE = 65536
GEOM = {"commitlog_file_size": FILE, "cq_file_size": 4000, "index_slots": 64, "index_entries": 512}


def _fill(path: Path, n: int, start: int = 0) -> None:
    with MessageStore(path, **GEOM) as s:
        for i in range(start, start + n):
            s.put(f"T{i % 3}", bytes([i % 251]) * (30 + i % 120), i % 4, tags=f"t{i % 5}", keys=[f"k{i}"])


def _decoded(path: Path, stop: int | None = None) -> list[dict[str, Any]]:
    """Every record up to ``stop`` (default: the end) as the rmq source decodes it."""
    cl = open_commitlog(str(path), FILE)
    try:
        end = cl.max_offset if stop is None else stop
        return [r for b in A.decode_range(cl, str(path), cl.min_offset, end) for r in b.to_pylist()]
    finally:
        cl.close()


def _copies(path: Path) -> list[dict[str, Any]]:
    """What pyarrow.dataset reads from the copy directory, as other engines would."""
    t = ds.dataset(str(columnar_dir(path)), format="parquet").to_table()
    assert t.schema.equals(A.ARROW_SCHEMA)
    return sorted(t.to_pylist(), key=lambda r: r["physical_offset"])


def _sealed_end(path: Path) -> int:
    """Where the last sealed file ends (the unsealed last file starts there)."""
    cl = open_commitlog(str(path), FILE)
    try:
        return max(mf.file_from_offset for mf in cl.queue.files if mf.file_from_offset < cl.max_offset)
    finally:
        cl.close()


def test_copies_hold_the_sealed_files_records_incrementally(tmp_path: Path, impl: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_impl, "IMPLEMENTATION", impl.name)
    store = tmp_path / "s"
    _fill(store, 1200)
    rep = materialize(store)
    end = _sealed_end(store)
    assert end == 3 * FILE and len(rep.converted) == 3 and rep.unsealed == 1 and rep.current == 0
    assert _copies(store) == _decoded(store, end)
    entries = load_manifest(store)
    assert sorted(entries) == [f"{i * FILE:020d}" for i in range(3)]
    e = entries[f"{FILE:020d}"]
    assert (e.file_size, e.format_version, e.copy) == (FILE, FORMAT_VERSION, f"{FILE:020d}.parquet")
    rows = [r for r in _decoded(store, end) if FILE <= r["physical_offset"] < 2 * FILE]
    assert e.records == len(rows) and e.last_record == rows[-1]["physical_offset"] - FILE
    assert e.scan_end == e.last_record + rows[-1]["size"] < FILE
    assert e.copy_bytes == os.path.getsize(columnar_dir(store) / e.copy)
    # idempotent: nothing to do; incremental: only the newly sealed files
    mtimes = {p.name: p.stat().st_mtime_ns for p in columnar_dir(store).glob("*.parquet")}
    rep = materialize(store)
    assert rep.converted == [] and rep.current == 3
    _fill(store, 900, start=1200)
    rep = materialize(store)
    newly = list(range(3 * FILE, _sealed_end(store), FILE))
    assert len(newly) >= 2 and [c.file_from for c in rep.converted] == newly and rep.current == 3
    assert {p.name: p.stat().st_mtime_ns for p in columnar_dir(store).glob("*.parquet")
            if p.name in mtimes} == mtimes
    assert _copies(store) == _decoded(store, _sealed_end(store))


def test_stale_copies_are_not_current_and_are_made_again(tmp_path: Path) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store)
    entries = load_manifest(store)
    names = sorted(entries)
    # an older rmqcore's copy, and a file whose last record was rewritten (recovery truncated and
    # the log went on differently)
    old = entries[names[0]]
    entries[names[0]] = type(old)(**{**old.__dict__, "format_version": FORMAT_VERSION - 1})
    save_manifest(store, entries.values())
    rewritten = entries[names[1]]
    with open(store / "commitlog" / rewritten.file, "r+b") as f:
        f.seek(rewritten.last_record + 12)  # its queue id
        f.write(b"\x00\x00\x00\x63")
    assert [e.file for e in current_copies(store, FILE)] == [names[2]]
    assert sorted(c.file for c in materialize(store).converted) == names[:2]
    assert [e.file for e in current_copies(store, FILE)] == names


def _killed_run(store: Path, kill_at: str) -> subprocess.CompletedProcess[str]:
    """``rmqcore materialize`` in a process that SIGKILLs itself at ``kill_at`` of the second file."""
    code = textwrap.dedent(f"""
        import os, signal, sys
        import pyarrow.parquet as pq
        from rmqcore.columnar import materialize as M
        seen = []
        def kill(*a, **k):
            os.kill(os.getpid(), signal.SIGKILL)
        if {kill_at!r} == "write":  # in the middle of writing the second copy
            real = pq.ParquetWriter.write_table
            def write_table(self, *a, **k):
                seen.append(1)
                if len(seen) == 2:
                    kill()
                return real(self, *a, **k)
            pq.ParquetWriter.write_table = write_table
        else:  # the second copy renamed into place, the manifest not yet rewritten
            real = M.save_manifest
            def save(*a, **k):
                seen.append(1)
                if len(seen) == 3:
                    kill()
                return real(*a, **k)
            M.save_manifest = save
        from rmqcore.cli import main
        sys.exit(main(["materialize", {str(store)!r}]))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])


@pytest.mark.crash
@pytest.mark.parametrize("kill_at", ["write", "manifest"])
def test_killed_run_leaves_whole_copies_and_a_rerun_completes(tmp_path: Path, kill_at: str) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    before = _decoded(store)
    p = _killed_run(store, kill_at)
    assert p.returncode == -signal.SIGKILL, p.stderr
    d = columnar_dir(store)
    first = f"{0:020d}"
    assert [e.file for e in current_copies(store, FILE)] == [first]
    leftovers = [q.name for q in d.iterdir() if ".tmp-" in q.name]
    if kill_at == "write":  # a half-written copy under a temp name that no reader lists
        assert len(leftovers) == 1 and leftovers[0].startswith(".")
        assert sorted(q.name for q in d.glob("*.parquet")) == [f"{first}.parquet"]
    else:  # a whole copy the manifest does not list yet
        assert leftovers == [] and len(list(d.glob("*.parquet"))) == 2
    assert _copies(store) == [r for r in before if r["physical_offset"] < 2 * FILE][: len(_copies(store))]
    with MessageStore(store, **GEOM) as s:  # the store itself is untouched
        assert s.commitlog.max_offset == open_commitlog(str(store), FILE).max_offset
    assert _decoded(store) == before
    out = subprocess.run([sys.executable, "-m", "rmqcore", "materialize", str(store), "--json"],
                         capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert (rep["converted"], rep["current"]) == (2, 1)
    assert [q.name for q in d.iterdir() if ".tmp-" in q.name] == []
    assert _copies(store) == _decoded(store, _sealed_end(store))


def test_retention_removes_copies_with_their_files(tmp_path: Path, impl: Any) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store)
    now = 1_800_000_000_000
    with MessageStore(store, impl=impl.name, delete_when="99", file_reserved_time_hours=1, **GEOM) as s:
        s.dispatch()
        deleted = s.clean_expired(now, force=True, usage_ratio=10)
    assert [os.path.basename(p) for p in deleted] == [f"{i * FILE:020d}" for i in range(3)]
    assert list(columnar_dir(store).glob("*.parquet")) == []
    assert current_copies(store, FILE) == []
    _fill(store, 600, start=1200)
    rep = materialize(store)
    newly = [f"{o:020d}" for o in range(3 * FILE, _sealed_end(store), FILE)]
    assert newly and sorted(load_manifest(store)) == [c.file for c in rep.converted] == newly
    assert _copies(store) == _decoded(store, _sealed_end(store))


def test_corrupt_record_is_reported_and_not_copied(tmp_path: Path) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    rows = [r for r in _decoded(store) if FILE <= r["physical_offset"] < 2 * FILE]
    bad = rows[5]
    path = store / "commitlog" / f"{FILE:020d}"
    data = bytearray(path.read_bytes())
    at = data.index(bad["body"], bad["physical_offset"] - FILE) + 3  # a byte of its body
    data[at] ^= 0xFF
    path.write_bytes(data)
    with pytest.raises(ChecksumError) as e:
        materialize(store)
    assert e.value.path == str(store / "commitlog" / f"{FILE:020d}")
    assert e.value.position == bad["physical_offset"] - FILE
    assert [c.file for c in current_copies(store, FILE)] == [f"{0:020d}"]
    made = [q.name for q in columnar_dir(store).iterdir() if q.name.endswith(".parquet") or ".tmp-" in q.name]
    assert made == [f"{0:020d}.parquet"]


def test_a_reader_ends_at_the_live_end_and_reports_damage_before_later_records(tmp_path: Path) -> None:
    store = tmp_path / "s"
    _fill(store, 1200)
    cl = open_commitlog(str(store), FILE)
    end = cl.max_offset
    cl.close()
    # a writer's record half-written at the end and its next file allocated ahead (zeros): the end
    last = store / "commitlog" / f"{3 * FILE:020d}"
    data = bytearray(last.read_bytes())
    head = (200).to_bytes(4, "big") + L.MAGIC_V1.to_bytes(4, "big", signed=True)
    data[end - 3 * FILE:end - 3 * FILE + 8] = head
    last.write_bytes(data)
    (store / "commitlog" / f"{4 * FILE:020d}").write_bytes(bytes(FILE))
    cl = open_commitlog(str(store), FILE)
    assert cl.max_offset == end
    cl.close()
    # a damaged record in the third file (recovery scans the last three), records after it:
    # reported where it is
    bad = [r for r in _decoded(store) if 2 * FILE <= r["physical_offset"] < 3 * FILE][7]
    third = store / "commitlog" / f"{2 * FILE:020d}"
    data = bytearray(third.read_bytes())
    data[data.index(bad["body"], bad["physical_offset"] - 2 * FILE) + 1] ^= 0x01
    third.write_bytes(data)
    with pytest.raises(ChecksumError) as e:
        open_commitlog(str(store), FILE)
    assert (e.value.path, e.value.position) == (str(third), bad["physical_offset"] - 2 * FILE)


def test_not_a_store_is_a_directory_not_found_error(tmp_path: Path) -> None:
    """(They were bare FileNotFoundErrors, outside RmqError; the class is still one.)"""
    from rmqcore.columnar.stores import store_dirs

    (tmp_path / "empty").mkdir()
    with pytest.raises(DirectoryNotFoundError, match="no commitlog directory"):
        materialize(tmp_path / "empty")
    with pytest.raises(DirectoryNotFoundError, match="no RocketMQ store matches"):
        store_dirs(str(tmp_path / "nothing-*"))
    assert issubclass(DirectoryNotFoundError, FileNotFoundError)
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["empty"]


def test_one_run_at_a_time(tmp_path: Path) -> None:
    store = tmp_path / "s"
    _fill(store, 300)
    with run_lock(store), pytest.raises(StoreLockedError, match="another materialize run"):
        materialize(store)


def test_tail_snapshots_what_no_copy_holds(tmp_path: Path) -> None:
    """materialize(tail=True): a snapshot of the unsealed file's records (outside the manifest,
    unseen by directory readers), a new one for what it grows by (the first one stays: queries
    planned on it keep reading it), the whole copy once it is sealed; the snapshots go after the
    grace period, and with their CommitLog file."""
    store = tmp_path / "s"
    _fill(store, 1200)
    rep = materialize(store, tail=True)
    tails = [e for e in rep.converted if not e.sealed]
    end = open_commitlog(str(store), FILE).max_offset
    assert [(e.file_from, e.start, e.scan_end) for e in tails] == [(3 * FILE, 0, end - 3 * FILE)]
    assert tails[0].copy.startswith(f"_tail/{3 * FILE:020d}.0-{end - 3 * FILE}.")
    assert sorted(load_manifest(store)) == [f"{i * FILE:020d}" for i in range(3)]
    assert _copies(store) == _decoded(store, 3 * FILE)  # directory readers: the sealed files' copies
    tail_rows = pq.read_table(columnar_dir(store) / tails[0].copy).to_pylist()
    assert tail_rows == [r for r in _decoded(store) if r["physical_offset"] >= 3 * FILE]
    assert materialize(store, tail=True).converted == []
    _fill(store, 10, start=1200)
    rep_grown = materialize(store, tail=True).converted
    assert [(e.file_from, e.start, e.sealed) for e in rep_grown] == [(3 * FILE, end - 3 * FILE, False)]
    assert (columnar_dir(store) / tails[0].copy).exists()
    _fill(store, 600, start=1210)  # sealed now: a whole copy, and a snapshot of the next file
    rep = materialize(store, tail=True)
    assert [(e.file_from, e.sealed) for e in rep.converted] == [(3 * FILE, True), (4 * FILE, True),
                                                                (5 * FILE, False)]
    assert len(list(tail_dir(store).iterdir())) == 3 and rep.removed == []
    live = rep.converted[-1].copy
    rep = materialize(store, snapshot_grace=0)  # file 3's snapshots are unused now
    assert sorted(rep.removed) == sorted(e.copy for e in tails + rep_grown)
    assert [f"_tail/{p.name}" for p in tail_dir(store).iterdir()] == [live]
    drop_copies(store, [f"{i * FILE:020d}" for i in range(6)])
    assert list(tail_dir(store).iterdir()) == []
    assert list(columnar_dir(store).glob("*.parquet")) == []


def test_readme_one_liners_read_the_copy(tmp_path: Path) -> None:
    """README's lines for pyarrow.dataset (always), DuckDB and Polars (when installed)."""
    import re

    readme = Path(__file__).resolve().parents[1] / "README.md"
    if not readme.is_file():  # the wheel round trip runs a copy of tests/ alone
        pytest.skip("no README.md beside tests/")
    text = readme.read_text()
    block = re.search(r"other engines read the sealed part.*?```python\n(.*?)```", text, re.S)
    assert block is not None
    lines = block.group(1).strip().splitlines()
    assert [ln.split(".")[0] for ln in lines] == ["pyarrow", "duckdb", "polars"]
    store = tmp_path / "s"
    _fill(store, 1200)
    materialize(store)
    want = _decoded(store, _sealed_end(store))
    import pyarrow.dataset

    t = eval(lines[0], {"pyarrow": pyarrow, "store_dir": str(store)})  # noqa: S307 - README's own line
    assert sorted(t.to_pylist(), key=lambda r: r["physical_offset"]) == want
    per_topic = sorted((t, sum(r["topic"] == t for r in want)) for t in {r["topic"] for r in want})
    for line in lines[1:]:
        name = line.split(".")[0]
        try:
            mod = __import__(name)
        except ImportError:
            continue
        got = eval(line, {name: mod, "store_dir": str(store)})  # noqa: S307
        rows = got.fetchall() if name == "duckdb" else got.rows()
        assert sorted((a, int(b)) for a, b in rows) == per_topic, name
