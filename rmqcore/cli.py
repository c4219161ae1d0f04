"""The ``rmqcore`` command: inspect, dump, query, verify and recover RocketMQ stores and Kafka partitions.

Exit status: 0 success, 1 the data is corrupt or a lookup failed, 2 usage errors.
Every ``--json`` output is one JSON object per line.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import layout as L
from .commitlog import Blank, CommitLog, ScanStop
from .errors import RmqError
from .message import MessageExt, format_host

__all__ = ["main", "message_to_json"]


def _detect_file_size(directory: Path, default: int) -> int:
    """The file size of a directory of fixed-size files: the size of its first named file."""
    if directory.is_dir():
        for p in sorted(directory.iterdir()):
            if L.file_name_to_offset(p.name) is not None and p.is_file():
                size = p.stat().st_size
                if size > 0:
                    return size
    return default


def _text(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def message_to_json(m: MessageExt) -> dict[str, Any]:
    """A record as ``rmqcore dump commitlog --json`` prints it."""
    props = m.properties
    return {
        "type": "msg",
        "physical_offset": m.position,
        "size": m.size,
        "magic": m.magic & 0xFFFFFFFF,
        "version": m.version,
        "body_crc": m.body_crc,
        "queue_id": m.queue_id,
        "flag": m.flag,
        "queue_offset": m.queue_offset,
        "stored_physical_offset": m.physical_offset,
        "sys_flag": m.sys_flag,
        "born_timestamp": m.born_timestamp,
        "born_host": format_host(m.born_host.address, m.born_host.port),
        "store_timestamp": m.store_timestamp,
        "store_host": format_host(m.store_host.address, m.store_host.port),
        "reconsume_times": m.reconsume_times,
        "prepared_transaction_offset": m.prepared_transaction_offset,
        "topic": m.topic,
        "properties": props,
        "body_len": len(m.body),
        "body_sha256": hashlib.sha256(m.body).hexdigest(),
        "msg_id": m.msg_id,
        "tags": m.tags,
        "keys": m.keys,
        "uniq_key": m.uniq_key,
    }


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def _cmd_dump_commitlog(args: argparse.Namespace) -> int:
    store = Path(args.store_dir)
    if not (store / "commitlog").is_dir():
        print(f"rmqcore: {store} has no commitlog/ directory (is it a store root?)", file=sys.stderr)
        return 2
    size = args.commitlog_file_size or _detect_file_size(store / "commitlog", L.DEFAULT_COMMITLOG_FILE_SIZE)
    status = 0
    with CommitLog(store, file_size=size, read_only=True, recover=False) as cl:
        for item in cl.iter_records(args.from_offset, verify_crc=not args.no_crc):
            if isinstance(item, MessageExt):
                if args.json:
                    _emit(message_to_json(item))
                else:
                    print(
                        f"{item.position:>14} msg   size={item.size} topic={item.topic} queue={item.queue_id} "
                        f"qoffset={item.queue_offset} stored={item.store_timestamp} body={len(item.body)}B "
                        f"tags={item.tags!r} keys={' '.join(item.keys)!r} msgId={item.msg_id}"
                    )
            elif isinstance(item, Blank):
                if args.json:
                    _emit({"type": "blank", "physical_offset": item.position, "size": item.declared_size,
                           "file_end": item.file_end})
                else:
                    print(f"{item.position:>14} blank size={item.declared_size} (file ends at {item.file_end})")
            elif isinstance(item, ScanStop):
                status = 1
                if args.json:
                    _emit({"type": "stop", "physical_offset": item.position, "reason": item.reason,
                           "path": item.path})
                print(
                    f"rmqcore: invalid record ({item.reason}) at offset {item.position} in {item.path}; "
                    "`rmqcore recover` cuts a torn tail",
                    file=sys.stderr,
                )
    return status


def _add_geometry(p: argparse.ArgumentParser) -> None:
    p.add_argument("--commitlog-file-size", type=int, default=None,
                   help="bytes per commitlog file (default: rmqcore.json, else the files, else 1 GiB)")
    p.add_argument("--cq-file-size", type=int, default=None,
                   help="bytes per consume queue file (default: rmqcore.json, else the files, else 6,000,000)")
    p.add_argument("--index-slots", type=int, default=None, help="index hash slots (default 5,000,000)")
    p.add_argument("--index-entries", type=int, default=None, help="index entries per file (default 20,000,000)")


def _geometry(args: argparse.Namespace) -> dict[str, Any]:
    out = {}
    for k in ("commitlog_file_size", "cq_file_size", "index_slots", "index_entries"):
        v = getattr(args, k, None)
        if v is not None:
            out[k] = v
    return out


def _open_store(args: argparse.Namespace, index: bool = False) -> Any:
    from .store import MessageStore

    store = Path(args.store_dir)
    if not (store / "commitlog").is_dir():
        raise _Usage(f"{store} has no commitlog/ directory (is it a store root?)")
    geometry = _geometry(args)
    if index and "index_slots" not in geometry and "index_entries" not in geometry:
        geometry.update(_index_geometry(store / "index"))
    return MessageStore(store, read_only=True, message_index_enable=index, **geometry)


def _index_geometry(directory: Path) -> dict[str, int]:
    """Index geometry of a foreign store: RocketMQ's default entry count unless the file size says
    otherwise with the default slots; pass --index-slots/--index-entries when both differ."""
    if not directory.is_dir():
        return {}
    for p in sorted(directory.iterdir()):
        if p.is_file() and p.name.isdigit():
            size = p.stat().st_size
            if size == 40 + 4 * L.DEFAULT_INDEX_SLOTS + 20 * L.DEFAULT_INDEX_ENTRIES:
                return {}
            # try the defaults for one of the two
            rest = size - 40 - 4 * L.DEFAULT_INDEX_SLOTS
            if rest > 0 and rest % 20 == 0:
                return {"index_entries": rest // 20}
            raise _Usage(f"{p}: {size} bytes does not match the default index geometry; "
                         "pass --index-slots and --index-entries")
    return {}


class _Usage(Exception):
    pass


def _cmd_dump_cq(args: argparse.Namespace) -> int:
    with _open_store(args) as s:
        cq = s.consume_queue(args.topic, args.queue_id)
        if cq is None:
            print(f"rmqcore: no consume queue {args.topic}/{args.queue_id} in {args.store_dir}", file=sys.stderr)
            return 1
        units = cq.all_units()
        base = cq.queue.min_offset() // L.CQ_UNIT_SIZE if cq.queue.files else 0
        for i, (off, size, tags) in enumerate(zip(units["offset"].tolist(), units["size"].tolist(),
                                                   units["tags"].tolist())):
            q = base + i
            if args.json:
                _emit({"queue_offset": q, "physical_offset": off, "size": size, "tags_code": tags})
            else:
                print(f"{q:>10} physical_offset={off} size={size} tags_code={tags}")
    return 0


def _cmd_get(args: argparse.Namespace) -> int:
    with _open_store(args) as s:
        r = s.get_messages(args.group, args.topic, args.queue, args.offset, args.max)
        out = {"status": r.status, "next_begin_offset": r.next_begin_offset, "min_offset": r.min_offset,
               "max_offset": r.max_offset, "physical_offsets": r.physical_offsets}
        if args.json:
            _emit(out)
        else:
            print(f"{r.status} next={r.next_begin_offset} min={r.min_offset} max={r.max_offset} "
                  f"messages={r.message_count}")
            for m in r.messages:
                print(f"  {m.queue_offset:>8} @{m.position} {m.topic} tags={m.tags!r} body={len(m.body)}B")
    return 0


def _cmd_dump_index(args: argparse.Namespace) -> int:
    with _open_store(args, index=True) as s:
        for f in s.index.index_files:
            h = f.header
            row = {"name": f.name, "begin_timestamp": h.begin_timestamp, "end_timestamp": h.end_timestamp,
                   "begin_phy_offset": h.begin_phy_offset, "end_phy_offset": h.end_phy_offset,
                   "hash_slot_count": h.hash_slot_count, "index_count": h.index_count}
            if args.json:
                _emit(row)
            else:
                print(" ".join(f"{k}={v}" for k, v in row.items()))
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    with _open_store(args, index=True) as s:
        msgs = s.query_by_key(args.topic, args.key, args.begin, args.end, args.max, raw=args.raw)
        for m in msgs:
            if args.json:
                _emit(message_to_json(m))
            else:
                print(f"{m.position:>14} {m.topic} queue={m.queue_id} qoffset={m.queue_offset} "
                      f"keys={' '.join(m.keys)!r} uniq={m.uniq_key} body={len(m.body)}B")
    return 0


class _Progress:
    """A progress bar on stderr for long runs (only when stderr is a terminal or --progress)."""

    def __init__(self, label: str, enabled: bool) -> None:
        self.label = label
        self.enabled = enabled

    def __call__(self, done: int, total: int) -> None:
        if self.enabled and total:
            pct = 100 * done // total
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar:<25}] {pct:3d}% ({done:,}/{total:,} bytes)")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def _cmd_verify(args: argparse.Namespace) -> int:
    from .verify import verify_store

    store = Path(args.store_dir)
    if not (store / "commitlog").is_dir():
        raise _Usage(f"{store} has no commitlog/ directory (is it a store root?)")
    geometry = _geometry(args)
    if "index_slots" not in geometry and "index_entries" not in geometry:
        geometry.update(_index_geometry(store / "index"))
    rep = verify_store(store, progress=_Progress("verify", args.progress or sys.stderr.isatty()), **geometry)
    if args.json:
        _emit(rep.as_dict())
    else:
        print(f"{store}: {rep.messages} messages, {rep.blanks} BLANKs, {rep.consume_queue_units} consume-queue "
              f"units, {rep.index_files} index files")
        for p in rep.problems:
            print(f"  PROBLEM {p.kind}: {p.path} offset {p.offset}: {p.detail}")
        print("  ok" if rep.ok else f"  {len(rep.problems)} problems (`rmqcore recover` repairs a torn tail)")
    return 0 if rep.ok else 1


def _cmd_recover(args: argparse.Namespace) -> int:
    from .store import MessageStore

    store = Path(args.store_dir)
    if not (store / "commitlog").is_dir():
        raise _Usage(f"{store} has no commitlog/ directory (is it a store root?)")
    geometry = _geometry(args)
    if "index_slots" not in geometry and "index_entries" not in geometry:
        geometry.update(_index_geometry(store / "index"))
    before = (store / "abort").exists()
    prog = _Progress("recover", args.progress or sys.stderr.isatty())
    with MessageStore(store, flavour=args.flavour, progress=prog, **geometry) as s:
        out = {"store": str(store), "abnormal": before, "min_offset": s.commitlog.min_offset,
               "max_offset": s.commitlog.max_offset,
               "queues": len(s.consume_queues), "index_files": len(s.index.index_files) if s.index else 0}
    out["clean"] = not (store / "abort").exists()
    if args.json:
        _emit(out)
    else:
        kind = "abnormal (crash)" if before else "normal"
        print(f"{store}: {kind} recovery; CommitLog [{out['min_offset']}, {out['max_offset']}), "
              f"{out['queues']} consume queues, {out['index_files']} index files; closed cleanly")
    return 0


def _cmd_offset_by_time(args: argparse.Namespace) -> int:
    with _open_store(args) as s:
        print(s.offset_by_time(args.topic, args.queue, args.time, args.boundary))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rmqcore", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    dump = sub.add_parser("dump", help="print the contents of store files")
    dsub = dump.add_subparsers(dest="what", required=True)
    dcl = dsub.add_parser("commitlog", help="every record and BLANK of a store's commitlog")
    dcl.add_argument("store_dir")
    dcl.add_argument("--from", dest="from_offset", type=int, default=None, help="start at this physical offset")
    dcl.add_argument("--json", action="store_true", help="one JSON object per line")
    dcl.add_argument("--no-crc", action="store_true", help="do not verify body CRCs")
    _add_geometry(dcl)
    dcl.set_defaults(func=_cmd_dump_commitlog)

    dcq = dsub.add_parser("cq", help="every unit of one consume queue")
    dcq.add_argument("store_dir")
    dcq.add_argument("topic")
    dcq.add_argument("queue_id", type=int)
    dcq.add_argument("--json", action="store_true", help="one JSON object per line")
    _add_geometry(dcq)
    dcq.set_defaults(func=_cmd_dump_cq)

    dix = dsub.add_parser("index", help="the header of every index file")
    dix.add_argument("store_dir")
    dix.add_argument("--json", action="store_true", help="one JSON object per line")
    _add_geometry(dix)
    dix.set_defaults(func=_cmd_dump_index)

    qry = sub.add_parser("query", help="messages by key (KEYS token or UNIQ_KEY), in physical order")
    qry.add_argument("store_dir")
    qry.add_argument("--topic", required=True)
    qry.add_argument("--key", required=True)
    qry.add_argument("--begin", type=int, default=0, help="store time window start (ms)")
    qry.add_argument("--end", type=int, default=2**63 - 1, help="store time window end (ms)")
    qry.add_argument("--max", type=int, default=64)
    qry.add_argument("--raw", action="store_true",
                     help="RocketMQ's answer: every hash match, collisions included")
    qry.add_argument("--json", action="store_true")
    _add_geometry(qry)
    qry.set_defaults(func=_cmd_query)

    get = sub.add_parser("get", help="pull messages from a queue as a consumer would (getMessage)")
    get.add_argument("store_dir")
    get.add_argument("--topic", required=True)
    get.add_argument("--queue", type=int, required=True)
    get.add_argument("--offset", type=int, required=True)
    get.add_argument("--max", type=int, default=32)
    get.add_argument("--group", default="rmqcore-cli")
    get.add_argument("--json", action="store_true")
    _add_geometry(get)
    get.set_defaults(func=_cmd_get)

    ver = sub.add_parser("verify", help="report every problem of a store; changes nothing")
    ver.add_argument("store_dir")
    ver.add_argument("--json", action="store_true", help="one JSON report")
    ver.add_argument("--progress", action="store_true", help="progress bar even when not on a terminal")
    _add_geometry(ver)
    ver.set_defaults(func=_cmd_verify)

    rec = sub.add_parser("recover", help="recover a store in place as opening it would, then close it cleanly")
    rec.add_argument("store_dir")
    rec.add_argument("--flavour", type=int, choices=(4, 5), default=5,
                     help="RocketMQ bytes for files recovery writes (checkpoint, abort): 4 or 5")
    rec.add_argument("--json", action="store_true")
    rec.add_argument("--progress", action="store_true", help="progress bar even when not on a terminal")
    _add_geometry(rec)
    rec.set_defaults(func=_cmd_recover)

    obt = sub.add_parser("offset-by-time", help="the queue offset for a store time (getOffsetInQueueByTime)")
    obt.add_argument("store_dir")
    obt.add_argument("--topic", required=True)
    obt.add_argument("--queue", type=int, required=True)
    obt.add_argument("--time", type=int, required=True, help="milliseconds since the epoch")
    obt.add_argument("--boundary", choices=("lower", "upper", "nearest"), default="lower",
                     help="lower: first message at/after; upper: last at/before; nearest: RocketMQ 4.x")
    _add_geometry(obt)
    obt.set_defaults(func=_cmd_offset_by_time)

    try:
        from .kafka import cli as kafka_cli
    except ImportError:
        kafka_cli = None  # type: ignore[assignment]
    if kafka_cli is not None and hasattr(kafka_cli, "register"):
        kafka_cli.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except _Usage as e:
        print(f"rmqcore: {e}", file=sys.stderr)
        return 2
    except RmqError as e:
        print(f"rmqcore: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
