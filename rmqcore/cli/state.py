"""What ``rmqcore`` reports about a store's state: the checkpoint, the lock, ``info`` and ``stats``."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .. import geometry as _geo
from .. import layout as L
from .common import (
    EXIT_PROBLEM,
    CliError,
    detect_flavour,
    emit,
    given_geometry,
    index_geometry,
    iso,
    open_store,
    store_root,
)

__all__ = ["cmd_dump_checkpoint", "cmd_info", "cmd_stats", "lock_state"]


_CP_NAMES = (("physic_msg_timestamp", "physicMsgTimestamp", True),
             ("logics_msg_timestamp", "logicsMsgTimestamp", True),
             ("index_msg_timestamp", "indexMsgTimestamp", True),
             ("master_flushed_offset", "masterFlushedOffset", False),
             ("confirm_phy_offset", "confirmPhyOffset", False))


def _checkpoint_info(store: Path, flavour: int) -> dict[str, Any] | None:
    """The checkpoint's fields (three for a 4.x layout, five for 5.x); None when there is no file."""
    from ..checkpoint import StoreCheckpoint

    path = store / "checkpoint"
    if not path.is_file():
        return None
    cp = StoreCheckpoint(path, flavour, read_only=True)
    out: dict[str, Any] = {"path": str(path), "size": path.stat().st_size, "layout": 5 if flavour >= 5 else 4}
    for attr, _java, _ts in _CP_NAMES[: 5 if flavour >= 5 else 3]:
        out[attr] = getattr(cp, attr)
    out["min_timestamp"] = cp.min_timestamp()
    out["min_timestamp_index"] = cp.min_timestamp_index()
    return out


def _checkpoint_lines(cp: dict[str, Any]) -> list[str]:
    lines = []
    for attr, java, is_ts in _CP_NAMES:
        if attr in cp:
            v = cp[attr]
            lines.append(f"{java:<21}{v:>15}  {iso(v)}" if is_ts else f"{java:<21}{v:>15}")
    lines.append(f"{'minTimestamp':<21}{cp['min_timestamp']:>15}  {iso(cp['min_timestamp'])}"
                 "  (min(physic, logics) - 3 s: where abnormal recovery starts)")
    return lines


def lock_state(store: Path) -> dict[str, Any]:
    """Whether another process holds the store's ``lock`` (byte 0, as RocketMQ and rmqcore lock it).

    Asks the kernel with F_GETLK on a read-only descriptor, so nothing is locked or created; ``held``
    is None where that query is not available."""
    import fcntl
    import struct

    from ..storelock import held_here

    path = store / "lock"
    if not path.is_file():
        return {"exists": False, "held": False, "pid": None}
    if held_here(store):  # this process is the writer: the query below would drop its lock
        return {"exists": True, "held": True, "pid": os.getpid()}
    if sys.platform.startswith("linux"):
        fmt = "hhqqi4x"
    elif sys.platform == "darwin":
        fmt = "qqihh"
    else:
        return {"exists": True, "held": None, "pid": None}
    if fmt.startswith("h"):
        req = struct.pack(fmt, fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
    else:
        req = struct.pack(fmt, 0, 1, 0, fcntl.F_WRLCK, os.SEEK_SET)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        got = fcntl.fcntl(fd, fcntl.F_GETLK, req)
    finally:
        os.close(fd)
    vals = struct.unpack(fmt, got)
    l_type, pid = (vals[0], vals[4]) if fmt.startswith("h") else (vals[3], vals[2])
    held = l_type != fcntl.F_UNLCK
    return {"exists": True, "held": held, "pid": pid if held else None}


def cmd_dump_checkpoint(args: argparse.Namespace) -> int:
    store = store_root(args, need_commitlog=False)
    flavour, why = detect_flavour(store, args.flavour)
    cp = _checkpoint_info(store, flavour)
    if cp is None:
        raise CliError(f"{store} has no checkpoint file",
                       "a store writes it at its first flush or clean close; is this the store root?", EXIT_PROBLEM)
    cp["layout_reason"] = why
    if args.json:
        emit(cp)
    else:
        fields = "five fields" if cp["layout"] >= 5 else "three fields"
        print(f"{cp['path']}: {cp['size']} bytes, RocketMQ {cp['layout']}.x layout ({fields}; {why})")
        for line in _checkpoint_lines(cp):
            print(line)
    return 0


# -- info ------------------------------------------------------------------------------------------
def _listing(directory: Path) -> list[dict[str, Any]]:
    """The 20-digit-named files of a CommitLog directory, in offset order, with their sizes."""
    if not directory.is_dir():
        return []
    out = []
    for p in sorted(directory.iterdir()):
        if L.file_name_to_offset(p.name) is not None and p.is_file():
            out.append({"name": p.name, "size": p.stat().st_size})
    return out


def _index_listing(directory: Path) -> list[dict[str, Any]]:
    from ..indexfile_format import HEADER_SIZE, IndexHeader

    if not directory.is_dir():
        return []
    out = []
    for p in sorted(directory.iterdir()):
        if not (p.is_file() and p.name.isdigit()):
            continue
        with open(p, "rb") as f:
            head = f.read(HEADER_SIZE)
        row: dict[str, Any] = {"name": p.name, "size": p.stat().st_size}
        if len(head) == HEADER_SIZE:
            h = IndexHeader.from_buffer(head)
            row.update(begin_timestamp=h.begin_timestamp, end_timestamp=h.end_timestamp,
                       begin_phy_offset=h.begin_phy_offset, end_phy_offset=h.end_phy_offset,
                       index_count=h.index_count)
        out.append(row)
    return out


def cmd_info(args: argparse.Namespace) -> int:
    from ..store import MessageStore

    store = store_root(args)
    flavour, flavour_reason = detect_flavour(store)
    saved = _geo.load(store) or {}
    given = given_geometry(args)
    sources: dict[str, str] = {}
    for k in ("commitlog_file_size", "cq_file_size", "index_slots", "index_entries"):
        sources[k] = "option" if k in given else "rmqcore.json" if k in saved else ""
    index_geo: dict[str, int] = {}
    if not sources["index_slots"] and not sources["index_entries"]:
        try:
            index_geo = index_geometry(store / "index")
        except CliError:  # two unknowns in one file size: report what can be known
            sources["index_slots"] = sources["index_entries"] = "unknown (pass --index-slots/--index-entries)"
    with MessageStore(store, read_only=True, message_index_enable=False, flavour=flavour, **given) as s:
        cfg = s.config
        cl = s.commitlog
        geometry: dict[str, Any] = {"commitlog_file_size": cfg.commitlog_file_size, "cq_file_size": cfg.cq_file_size}
        for k, dname in (("commitlog_file_size", "commitlog"), ("cq_file_size", "consumequeue")):
            sources[k] = sources[k] or ("files" if _geo.detect_file_size(store / dname) else "default")
        if sources["index_slots"].startswith("unknown"):
            geometry["index_slots"] = geometry["index_entries"] = None
        else:
            for k in ("index_slots", "index_entries"):
                geometry[k] = index_geo.get(k, getattr(cfg, k))
                sources[k] = sources[k] or ("index file size" if k in index_geo else "default")
        geometry["sources"] = sources
        cp = _checkpoint_info(store, flavour)
        abort = store / "abort"
        out: dict[str, Any] = {
            "store": str(store),
            "flavour": flavour,
            "flavour_reason": flavour_reason,
            "geometry": geometry,
            "commitlog": {"files": _listing(store / "commitlog"), "min_offset": cl.min_offset,
                          "max_offset": cl.max_offset, "flushed_offset": cl.flushed_offset,
                          "confirm_offset": cp.get("confirm_phy_offset") if cp else None},
            "consume_queues": {"topics": len({t for t, _q in s.consume_queues}), "queues": len(s.consume_queues)},
            "index_files": _index_listing(store / "index"),
            "dispatch": {"reput_from_offset": s.reput_from_offset, "lag_bytes": s.dispatch_lag},
            "checkpoint": cp,
            "abort": {"exists": abort.exists(),
                      "content": abort.read_text(errors="replace").strip() if abort.is_file() else None},
            "last_shutdown_clean": not abort.exists(),
            "lock": lock_state(store),
        }
    if args.json:
        emit(out)
        return 0
    g = out["geometry"]
    c = out["commitlog"]
    idx = (f"index {g['index_slots']} slots x {g['index_entries']} entries ({sources['index_slots']})"
           if g["index_slots"] is not None else f"index geometry {sources['index_slots']}")
    print(f"store          {store}")
    print(f"flavour        RocketMQ {flavour}.x ({flavour_reason})")
    print(f"geometry       commitlog file {g['commitlog_file_size']} B ({sources['commitlog_file_size']}), "
          f"consume queue file {g['cq_file_size']} B ({sources['cq_file_size']}), {idx}")
    print(f"commitlog      {len(c['files'])} files, {sum(f['size'] for f in c['files'])} bytes on disk")
    for f in c["files"]:
        print(f"                 {f['name']}  {f['size']}")
    print(f"offsets        min {c['min_offset']}  max {c['max_offset']}  flushed {c['flushed_offset']}  "
          f"confirm {'-' if c['confirm_offset'] is None else c['confirm_offset']}")
    d = out["dispatch"]
    print(f"dispatch       reput from {d['reput_from_offset']}, lag {d['lag_bytes']} bytes not in the consume queues")
    print(f"consume queues {out['consume_queues']['topics']} topics, {out['consume_queues']['queues']} queues")
    print(f"index files    {len(out['index_files'])}")
    for f in out["index_files"]:
        extra = (f"  {max(f['index_count'], 1) - 1} entries, stores {iso(f['begin_timestamp'])} .. "
                 f"{iso(f['end_timestamp'])}" if "index_count" in f else "  (no header)")
        print(f"                 {f['name']}  {f['size']}{extra}")
    if cp is None:
        print("checkpoint     none")
    else:
        print(f"checkpoint     {cp['size']} bytes, {cp['layout']}.x layout")
        for line in _checkpoint_lines(cp):
            print(f"                 {line}")
    if out["last_shutdown_clean"]:
        print("last shutdown  clean (no abort file)")
    else:
        print("last shutdown  ABNORMAL (abort file present): opening it runs crash recovery; `rmqcore recover` does it")
    lk = out["lock"]
    state = ("no lock file" if not lk["exists"] else "unknown on this platform" if lk["held"] is None
             else f"HELD by pid {lk['pid']} (a broker or writer has the store open)" if lk["held"] else "not held")
    print(f"lock           {state}")
    return 0


# -- stats -----------------------------------------------------------------------------------------
def cmd_stats(args: argparse.Namespace) -> int:
    with open_store(args) as s:
        cl_min = s.commitlog.min_offset
        rows = []
        for (topic, qid), cq in sorted(s.consume_queues.items()):
            if args.topic is not None and topic != args.topic:
                continue
            lo, hi = cq.min_offset, cq.max_offset
            units = cq.all_units()
            base = cq.queue.min_offset() // L.CQ_UNIT_SIZE if cq.queue.files else 0
            live = units[max(lo - base, 0): max(hi - base, 0)]
            real = ~((live["offset"] == 0) & (live["size"] == 0x7FFFFFFF)) & (live["offset"] >= cl_min)
            first = cq.get(lo) if hi > lo else None
            last = cq.get(hi - 1) if hi > lo else None
            rows.append({
                "type": "queue", "topic": topic, "queue_id": qid, "min_offset": lo, "max_offset": hi,
                "messages": hi - lo, "bytes": int(live["size"][real].sum()),
                "earliest_store_time": s.store_time_of(first[0]) if first and first[0] >= cl_min else None,
                "latest_store_time": s.store_time_of(last[0]) if last and last[0] >= cl_min else None,
            })
    times = [r["earliest_store_time"] for r in rows if r["earliest_store_time"] is not None]
    ends = [r["latest_store_time"] for r in rows if r["latest_store_time"] is not None]
    total = {"type": "total", "topics": len({r["topic"] for r in rows}), "queues": len(rows),
             "messages": sum(r["messages"] for r in rows), "bytes": sum(r["bytes"] for r in rows),
             "earliest_store_time": min(times) if times else None, "latest_store_time": max(ends) if ends else None}
    if args.topic is not None and not rows:
        raise CliError(f"no consume queue of topic {args.topic} in {args.store_dir}",
                       "run `rmqcore stats STORE_DIR` without --topic to list the topics", EXIT_PROBLEM)
    if args.json:
        for r in rows:
            emit(r)
        emit(total)
        return 0
    w = max([len("topic")] + [len(r["topic"]) for r in rows])
    print(f"{'topic':<{w}} {'queue':>5} {'min':>10} {'max':>10} {'messages':>10} {'bytes':>12}  "
          f"{'earliest store time':<29} latest store time")
    for r in rows:
        print(f"{r['topic']:<{w}} {r['queue_id']:>5} {r['min_offset']:>10} {r['max_offset']:>10} "
              f"{r['messages']:>10} {r['bytes']:>12}  {iso(r['earliest_store_time'] or 0):<29} "
              f"{iso(r['latest_store_time'] or 0)}")
    print(f"total: {total['topics']} topics, {total['queues']} queues, {total['messages']} messages, "
          f"{total['bytes']} bytes, stored {iso(total['earliest_store_time'] or 0)} .. "
          f"{iso(total['latest_store_time'] or 0)}")
    return 0
