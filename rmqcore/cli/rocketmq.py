"""The RocketMQ commands of ``rmqcore``: dump, get, tail, query, verify, recover, offset-by-time,
materialize (and the parsers of info, stats and dump checkpoint, whose work is in ``state``)."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from .. import geometry as _geo
from .. import layout as L
from ..commitlog import Blank, CommitLog, ScanStop
from ..message import MessageExt, format_host
from .common import (
    EXIT_OK,
    EXIT_PROBLEM,
    CliError,
    detect_flavour,
    emit,
    full_geometry,
    given_geometry,
    open_store,
    say_error,
    store_command,
    store_root,
)
from .state import cmd_dump_checkpoint, cmd_info, cmd_stats

__all__ = ["message_to_json", "register"]


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


def _cmd_dump_commitlog(args: argparse.Namespace) -> int:
    store = store_root(args)
    values = _geo.resolve(store, given_geometry(args)).values
    size = values.get("commitlog_file_size", L.DEFAULT_COMMITLOG_FILE_SIZE)
    status = 0
    with CommitLog(store, file_size=size, read_only=True, recover=False) as cl:
        for item in cl.iter_records(args.from_offset, verify_crc=not args.no_crc):
            if isinstance(item, MessageExt):
                if args.json:
                    emit(message_to_json(item))
                else:
                    print(
                        f"{item.position:>14} msg   size={item.size} topic={item.topic} queue={item.queue_id} "
                        f"qoffset={item.queue_offset} stored={item.store_timestamp} body={len(item.body)}B "
                        f"tags={item.tags!r} keys={' '.join(item.keys)!r} msgId={item.msg_id}"
                    )
            elif isinstance(item, Blank):
                if args.json:
                    emit({"type": "blank", "physical_offset": item.position, "size": item.declared_size,
                           "file_end": item.file_end})
                else:
                    print(f"{item.position:>14} blank size={item.declared_size} (file ends at {item.file_end})")
            elif isinstance(item, ScanStop):
                status = 1
                if args.json:
                    emit({"type": "stop", "physical_offset": item.position, "reason": item.reason,
                           "path": item.path})
                say_error(f"invalid record ({item.reason}) at offset {item.position} in {item.path}",
                           "`rmqcore verify` reports every problem; `rmqcore recover` cuts a torn tail")
    return status


def _cmd_dump_cq(args: argparse.Namespace) -> int:
    with open_store(args) as s:
        cq = s.consume_queue(args.topic, args.queue_id)
        if cq is None:
            raise CliError(f"no consume queue {args.topic}/{args.queue_id} in {args.store_dir}",
                           "`rmqcore stats STORE_DIR` lists the topics and queues there are", EXIT_PROBLEM)
        units = cq.all_units()
        base = cq.queue.min_offset() // L.CQ_UNIT_SIZE if cq.queue.files else 0
        for i, (off, size, tags) in enumerate(zip(units["offset"].tolist(), units["size"].tolist(),
                                                   units["tags"].tolist())):
            q = base + i
            if args.json:
                emit({"queue_offset": q, "physical_offset": off, "size": size, "tags_code": tags})
            else:
                print(f"{q:>10} physical_offset={off} size={size} tags_code={tags}")
    return 0


def _cmd_get(args: argparse.Namespace) -> int:
    with open_store(args) as s:
        r = s.get_messages(args.group, args.topic, args.queue, args.offset, args.max)
        out = {"status": r.status, "next_begin_offset": r.next_begin_offset, "min_offset": r.min_offset,
               "max_offset": r.max_offset, "physical_offsets": r.physical_offsets}
        if args.json:
            emit(out)
        else:
            print(f"{r.status} next={r.next_begin_offset} min={r.min_offset} max={r.max_offset} "
                  f"messages={r.message_count}")
            for m in r.messages:
                print(f"  {m.queue_offset:>8} @{m.position} {m.topic} tags={m.tags!r} body={len(m.body)}B")
    return 0


# -- tail: messages as they arrive (a follower) ---------------------------------------------------------
def _tail_line(m: MessageExt, as_json: bool) -> str:
    """One message as ``tail`` prints it: ``rmqcore dump commitlog --json``'s fields and the body
    (``body`` when it is UTF-8, else ``body_base64``), or a line of text."""
    try:
        body: str | None = m.body.decode("utf-8")
    except UnicodeDecodeError:
        body = None
    if as_json:
        obj = message_to_json(m)
        if body is not None:
            obj["body"] = body
        else:
            import base64

            obj["body_base64"] = base64.b64encode(m.body).decode("ascii")
        return json.dumps(obj, ensure_ascii=False)
    shown = body if body is not None else f"<{len(m.body)} bytes, not UTF-8>"
    return (f"{m.topic} queue={m.queue_id} offset={m.queue_offset} @{m.position} tags={m.tags!r} "
            f"keys={' '.join(m.keys)!r} {shown}")


def _tail_queues(store: Path, topic: str) -> list[int]:
    d = store / "consumequeue" / topic
    if not d.is_dir():
        return []
    return sorted(int(e.name) for e in os.scandir(d) if e.is_dir() and e.name.isdigit())


def _cmd_tail(args: argparse.Namespace) -> int:
    """Follow one queue, or every queue of a topic (one waiting thread per queue, new queues found
    each second), printing each message once it is published, until ``--max`` or Ctrl-C."""
    import queue as _queue
    import threading
    import time

    from ..errors import StoreClosedError
    from ..store import MessageStore

    store = store_root(args, need_commitlog=False)
    start = args.from_
    if start not in ("earliest", "latest"):
        try:
            start = int(start)
        except ValueError:
            raise CliError(f"--from {args.from_!r} is not earliest, latest or an offset",
                           "pass --from earliest, --from latest or --from OFFSET") from None
        if start < 0:
            raise CliError(f"--from {start} is negative", "pass an offset >= 0")
    if args.max is not None and args.max < 1:
        raise CliError(f"--max {args.max} is not positive", "pass --max N with N >= 1")
    out: _queue.Queue[tuple[str, BaseException | None]] = _queue.Queue(maxsize=10000)
    stop = threading.Event()
    with MessageStore(store, read_only=True, follow=True, **given_geometry(args)) as s:

        def follow(qid: int, start: str | int) -> None:
            try:
                if start == "earliest":
                    off = s.min_offset(args.topic, qid)
                elif start == "latest":
                    off = s.max_offset(args.topic, qid)
                else:
                    off = int(start)
                while not stop.is_set():
                    r = s.get_messages("rmqcore-tail", args.topic, qid, off, 32, wait=0.5)
                    if r.status == "FOUND":
                        for m in r.messages:
                            out.put((_tail_line(m, args.json), None))
                        off = r.next_begin_offset
                    elif r.status in ("OFFSET_TOO_SMALL", "OFFSET_OVERFLOW_BADLY", "NO_MATCHED_MESSAGE",
                                      "MESSAGE_WAS_REMOVING"):
                        off = r.next_begin_offset  # retention moved the queue on (PULL_OFFSET_MOVED)
            except StoreClosedError:
                return
            except BaseException as e:  # noqa: BLE001 - handed to the main thread, which raises it
                out.put(("", e))

        threads: dict[int, threading.Thread] = {}
        printed = 0
        next_look = 0.0
        first = start  # queues that appear later are new: all of them is what arrived since
        try:
            while args.max is None or printed < args.max:
                now = time.monotonic()
                if now >= next_look:  # the topic's queues, as they appear
                    for qid in [args.queue] if args.queue is not None else _tail_queues(store, args.topic):
                        if qid not in threads:
                            t = threading.Thread(target=follow, args=(qid, first), daemon=True,
                                                 name=f"rmqcore-tail-{qid}")
                            threads[qid] = t
                            t.start()
                    next_look = now + 1.0
                    if first == "latest":
                        first = "earliest"
                try:
                    line, err = out.get(timeout=0.2)
                except _queue.Empty:
                    continue
                if err is not None:
                    raise err
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
                printed += 1
        except KeyboardInterrupt:
            pass  # the way to stop following
        finally:
            stop.set()  # each thread leaves at its next look (within its 0.5 s wait), before the close
            for t in threads.values():
                t.join(5)
    return EXIT_OK


def _add_tail(sub: Any) -> None:
    with store_command(sub, "tail", _cmd_tail,
                       help="print messages as they arrive, like kafka-console-consumer "
                            "(a read-only follower)") as tl:
        tl.add_argument("--topic", required=True)
        tl.add_argument("--queue", type=int, default=None,
                        help="one queue id (default: every queue of the topic)")
        tl.add_argument("--from", dest="from_", default="latest", metavar="earliest|latest|OFFSET",
                        help="where each queue starts (default latest: only messages published from now on)")
        tl.add_argument("--max", type=int, default=None, help="stop after N messages (default: until Ctrl-C)")
        tl.add_argument("--json", action="store_true", help="one JSON object per message")


def _cmd_dump_index(args: argparse.Namespace) -> int:
    with open_store(args, index=True) as s:
        for f in s.index.index_files:
            h = f.header
            row = {"name": f.name, "begin_timestamp": h.begin_timestamp, "end_timestamp": h.end_timestamp,
                   "begin_phy_offset": h.begin_phy_offset, "end_phy_offset": h.end_phy_offset,
                   "hash_slot_count": h.hash_slot_count, "index_count": h.index_count}
            if args.json:
                emit(row)
            else:
                print(" ".join(f"{k}={v}" for k, v in row.items()))
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    with open_store(args, index=True) as s:
        msgs = s.query_by_key(args.topic, args.key, args.begin, args.end, args.max, raw=args.raw)
        if not msgs:
            raise CliError(f"no message of topic {args.topic} has key {args.key!r} in that time window",
                           "check the topic and key (`rmqcore dump commitlog` shows the keys)", EXIT_PROBLEM)
        for m in msgs:
            if args.json:
                emit(message_to_json(m))
            else:
                print(f"{m.position:>14} {m.topic} queue={m.queue_id} qoffset={m.queue_offset} "
                      f"keys={' '.join(m.keys)!r} uniq={m.uniq_key} body={len(m.body)}B")
    return 0


class _Progress:
    """A progress bar on stderr for long runs (only when stderr is a terminal or --progress)."""

    def __init__(self, label: str, forced: bool) -> None:
        self.label = label
        self.enabled = forced or sys.stderr.isatty()

    def __call__(self, done: int, total: int) -> None:
        if self.enabled and total:
            pct = 100 * done // total
            bar = "#" * (pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar:<25}] {pct:3d}% ({done:,}/{total:,} bytes)")
            if done >= total:
                sys.stderr.write("\n")
            sys.stderr.flush()


def _cmd_verify(args: argparse.Namespace) -> int:
    from ..verify import verify_store

    store = store_root(args)
    geometry = full_geometry(args, store)
    geometry["flavour"] = detect_flavour(store)[0]
    rep = verify_store(store, progress=_Progress("verify", args.progress), **geometry)
    if args.json:
        emit(rep.as_dict())
    else:
        print(f"{store}: {rep.messages} messages, {rep.blanks} BLANKs, {rep.consume_queue_units} consume-queue "
              f"units, {rep.index_files} index files")
        for p in rep.problems:
            print(f"  PROBLEM {p.kind}: {p.path} offset {p.offset}: {p.detail}")
        print("  ok" if rep.ok else f"  {len(rep.problems)} problems (`rmqcore recover` repairs a torn tail)")
    return 0 if rep.ok else 1


def _cmd_recover(args: argparse.Namespace) -> int:
    import warnings

    from ..errors import RecoveryCutWarning
    from ..store import MessageStore

    store = store_root(args)
    geometry = full_geometry(args, store)
    flavour, why = detect_flavour(store, args.flavour)
    before = (store / "abort").exists()
    prog = _Progress("recover", args.progress)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RecoveryCutWarning)
        # every consume-queue unit is checked against the CommitLog (an open checks the last ones)
        with MessageStore(store, flavour=flavour, progress=prog, check_consume_queues=True, **geometry) as s:
            out = {"store": str(store), "flavour": flavour, "flavour_reason": why, "abnormal": before,
                   "min_offset": s.commitlog.min_offset, "max_offset": s.commitlog.max_offset,
                   "queues": len(s.consume_queues), "index_files": len(s.index.index_files) if s.index else 0,
                   **s.recovery.as_dict()}
    for w in caught:  # what recovery cut: one line each (the JSON has the details)
        if issubclass(w.category, RecoveryCutWarning):
            sys.stderr.write(f"rmqcore: warning: {w.message}\n")
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    out["clean"] = not (store / "abort").exists()
    if args.json:
        emit(out)
    else:
        kind = "abnormal (crash)" if before else "normal"
        print(f"{store}: {kind} recovery (RocketMQ {flavour}.x files: {why}); CommitLog "
              f"[{out['min_offset']}, {out['max_offset']}), {out['queues']} consume queues, "
              f"{out['index_files']} index files; closed cleanly")
        for c in out["cuts"]:
            kept = f"kept in {c['quarantine']}" if c["quarantine"] else "zeroed"
            print(f"  cut at offset {c['offset']} ({c['reason']}): {c['bytes']} bytes, "
                  f"{c['records']} valid records, {kept}")
        for r in s.recovery.repaired_queues:
            print(f"  rebuilt consume queue {r.topic}/{r.queue_id} from offset {r.queue_offset}: {r.detail}")
        if out["index_files_rebuilt"]:
            print(f"  rebuilt index files {', '.join(out['index_files_rebuilt'])}")
    return 0


def _cmd_materialize(args: argparse.Namespace) -> int:
    store = store_root(args)
    try:
        import pyarrow  # type: ignore[import-untyped,unused-ignore]  # noqa: F401

        from ..columnar.materialize import materialize
    except ImportError as e:
        raise CliError(f"materialize needs pyarrow ({e})", "pip install pyarrow, or rmqcore[spark]") from None

    def progress(e: Any) -> None:
        if not args.json:
            print(f"  {e.file}: {e.records} records, {e.scan_end:,} bytes -> {e.copy} ({e.copy_bytes:,} B)")

    rep = materialize(store, commitlog_file_size=args.commitlog_file_size, max_files=args.max_files,
                      compression=args.compression, tail=args.tail, progress=progress)
    out = {"store": str(store), "converted": len(rep.converted), "current": rep.current,
           "unsealed": rep.unsealed, "pending": rep.pending, "commitlog_bytes": rep.commitlog_bytes,
           "copy_bytes": rep.copy_bytes, "removed": rep.removed, "seconds": round(rep.seconds, 3)}
    if args.json:
        emit(out)
    else:
        rate = rep.commitlog_bytes / 1e6 / rep.seconds if rep.seconds else 0.0
        print(f"{store}: {len(rep.converted)} files converted ({rep.commitlog_bytes:,} bytes of CommitLog -> "
              f"{rep.copy_bytes:,} bytes of Parquet, {rate:.0f} MB/s), {rep.current} already current, "
              f"{rep.unsealed} unsealed (snapshotted by readers, or --tail), "
              f"{rep.pending} left for a later run")
    return 0


def _cmd_offset_by_time(args: argparse.Namespace) -> int:
    with open_store(args) as s:
        off = s.offset_by_time(args.topic, args.queue, args.time, args.boundary)
    if args.json:
        emit({"topic": args.topic, "queue_id": args.queue, "time": args.time, "boundary": args.boundary,
               "offset": off})
    else:
        print(off)
    return 0


def register(sub: Any) -> None:
    """Add the RocketMQ commands to the ``rmqcore`` parser's subparsers."""

    dump = sub.add_parser("dump", help="print the contents of store files")
    dsub = dump.add_subparsers(dest="what", required=True)
    with store_command(dsub, "commitlog", _cmd_dump_commitlog,
                       help="every record and BLANK of a store's commitlog") as dcl:
        dcl.add_argument("--from", dest="from_offset", type=int, default=None,
                         help="start at this physical offset")
        dcl.add_argument("--json", action="store_true", help="one JSON object per line")
        dcl.add_argument("--no-crc", action="store_true", help="do not verify body CRCs")

    with store_command(dsub, "cq", _cmd_dump_cq, help="every unit of one consume queue") as dcq:
        dcq.add_argument("topic")
        dcq.add_argument("queue_id", type=int)
        dcq.add_argument("--json", action="store_true", help="one JSON object per line")

    with store_command(dsub, "index", _cmd_dump_index, help="the header of every index file") as dix:
        dix.add_argument("--json", action="store_true", help="one JSON object per line")

    with store_command(dsub, "checkpoint", cmd_dump_checkpoint, geometry=False,
                       help="the checkpoint file's fields (4.x: three, 5.x: five)") as dcp:
        dcp.add_argument("--flavour", type=int, choices=(4, 5), default=None,
                         help="read the 4.x (three-field) or 5.x (five-field) layout (default: detected)")
        dcp.add_argument("--json", action="store_true", help="one JSON object")

    with store_command(sub, "info", cmd_info,
                       help="geometry, files, offsets, dispatch lag, checkpoint, abort and lock; "
                            "read-only") as inf:
        inf.add_argument("--json", action="store_true", help="one JSON object")

    with store_command(sub, "stats", cmd_stats,
                       help="messages, offsets, bytes and store times per topic/queue; read-only") as sts:
        sts.add_argument("--topic", default=None, help="only this topic's queues")
        sts.add_argument("--json", action="store_true", help="one JSON object per queue, then the totals")

    with store_command(sub, "query", _cmd_query,
                       help="messages by key (KEYS token or UNIQ_KEY), in physical order") as qry:
        qry.add_argument("--topic", required=True)
        qry.add_argument("--key", required=True)
        qry.add_argument("--begin", type=int, default=0, help="store time window start (ms)")
        qry.add_argument("--end", type=int, default=2**63 - 1, help="store time window end (ms)")
        qry.add_argument("--max", type=int, default=64)
        qry.add_argument("--raw", action="store_true",
                         help="RocketMQ's answer: every hash match, collisions included")
        qry.add_argument("--json", action="store_true")

    with store_command(sub, "get", _cmd_get,
                       help="pull messages from a queue as a consumer would (getMessage)") as get:
        get.add_argument("--topic", required=True)
        get.add_argument("--queue", type=int, required=True)
        get.add_argument("--offset", type=int, required=True)
        get.add_argument("--max", type=int, default=32)
        get.add_argument("--group", default="rmqcore-cli")
        get.add_argument("--json", action="store_true")

    _add_tail(sub)

    with store_command(sub, "verify", _cmd_verify,
                       help="report every problem of a store; changes nothing") as ver:
        ver.add_argument("--json", action="store_true", help="one JSON report")
        ver.add_argument("--progress", action="store_true", help="progress bar even when not on a terminal")

    with store_command(sub, "recover", _cmd_recover,
                       help="recover a store in place as opening it would, then close it cleanly") as rec:
        rec.add_argument("--flavour", type=int, choices=(4, 5), default=None,
                         help="RocketMQ bytes for files recovery writes (checkpoint, abort): 4 or 5 "
                              "(default: rmqcore.json, else detected from the checkpoint layout and "
                              "abort file)")
        rec.add_argument("--json", action="store_true")
        rec.add_argument("--progress", action="store_true", help="progress bar even when not on a terminal")

    with store_command(sub, "offset-by-time", _cmd_offset_by_time,
                       help="the queue offset for a store time (getOffsetInQueueByTime)") as obt:
        obt.add_argument("--topic", required=True)
        obt.add_argument("--queue", type=int, required=True)
        obt.add_argument("--time", type=int, required=True, help="milliseconds since the epoch")
        obt.add_argument("--boundary", choices=("lower", "upper", "nearest"), default="lower",
                         help="lower: first message at/after; upper: last at/before; nearest: RocketMQ 4.x")
        obt.add_argument("--json", action="store_true", help="one JSON object")

    with store_command(sub, "materialize", _cmd_materialize, geometry=False,
                       help="Parquet copies of sealed CommitLog files (rmqcore-columnar/)",
                       description="Needs pyarrow. Only sealed files are read: the store may be "
                                   "open.") as mat:
        mat.add_argument("--max-files", type=int, default=None, help="convert at most N files, oldest first")
        mat.add_argument("--tail", action="store_true",
                         help="also snapshot what no sealed copy holds now (a store no longer written)")
        mat.add_argument("--compression", default="snappy", choices=("snappy", "zstd", "lz4", "gzip", "none"))
        mat.add_argument("--commitlog-file-size", type=int, default=None,
                         help="bytes per commitlog file (default: rmqcore.json, else the files, else 1 GiB)")
        mat.add_argument("--json", action="store_true", help="one JSON report")
