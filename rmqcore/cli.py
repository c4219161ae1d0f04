"""The ``rmqcore`` command: inspect, dump, query, verify and recover RocketMQ stores and Kafka partitions.

Exit status, the same for every command:

* 0 -- success.
* 1 -- the store is the problem, or the command found nothing it defines as a result: corrupt data,
  an unclean store that ``verify`` reports, a lock held by another process, an unknown consume
  queue, a missing checkpoint file, a key ``query`` that matched no message.
* 2 -- the invocation is the problem: bad or missing arguments, a directory that does not exist or
  is not a store root, geometry options that do not fit the files, a missing benchmark script.

Errors are one line on stderr, ``rmqcore: error: <what happened>; <what to do>``, never a traceback
for rmqcore's own errors (:class:`~rmqcore.errors.RmqError`) or the operating system's (``OSError``).
Every ``--json`` output is one JSON object per line on stdout; progress bars (``verify``,
``recover``) go to stderr, only when stderr is a terminal or ``--progress`` is given. Read-only
commands (everything but ``recover``) change nothing on disk: no lock, no abort file, no recovery
writes.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from . import geometry as _geo
from . import layout as L
from .commitlog import Blank, CommitLog, ScanStop
from .errors import (
    ConfigError,
    CorruptionError,
    InvalidMessageError,
    MissingCodecError,
    OffsetOutOfRangeError,
    RmqError,
    StoreLockedError,
)
from .message import MessageExt, format_host

__all__ = ["main", "run", "message_to_json", "CliError", "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_PROBLEM = 1  # the store (data or state) is the problem, or nothing was found
EXIT_USAGE = 2  # the invocation is the problem

READ_ONLY_COMMANDS = "info, stats, verify, dump, query, get, offset-by-time, tail"


class CliError(Exception):
    """A failure the command reports as one line: ``what`` happened; ``todo`` says what to do."""

    def __init__(self, what: str, todo: str, code: int = EXIT_USAGE) -> None:
        super().__init__(f"{what}; {todo}")
        self.what = what
        self.todo = todo
        self.code = code


def error_line(what: str, todo: str) -> str:
    """The one-line error format of every rmqcore command."""
    return f"rmqcore: error: {what}; {todo}"


def _say_error(what: str, todo: str) -> None:
    sys.stderr.write(error_line(what, todo) + "\n")
    sys.stderr.flush()


class _Parser(argparse.ArgumentParser):
    """argparse with rmqcore's one-line usage errors (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, error_line(message, f"see `{self.prog} --help`") + "\n")


def _store_root(args: argparse.Namespace, need_commitlog: bool = True) -> Path:
    """The STORE_DIR argument, checked: it exists, is a directory and (by default) holds commitlog/."""
    store = Path(args.store_dir)
    if not store.exists():
        raise CliError(f"{store} does not exist", "pass the root directory of a RocketMQ store")
    if not store.is_dir():
        raise CliError(f"{store} is not a directory", "pass the root directory of a RocketMQ store")
    if need_commitlog and not (store / "commitlog").is_dir():
        raise CliError(f"{store} has no commitlog/ directory",
                       "pass a store root (the directory holding commitlog/, consumequeue/, index/)")
    return store


def _iso(ms: int) -> str:
    """A store time (ms since the epoch) as ISO 8601 UTC; ``-`` for 0 (never set)."""
    if ms <= 0:
        return "-"
    try:
        return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return "out of range"


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
    store = _store_root(args)
    values = _geo.resolve(store, _geometry(args)).values
    size = values.get("commitlog_file_size", L.DEFAULT_COMMITLOG_FILE_SIZE)
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
                _say_error(f"invalid record ({item.reason}) at offset {item.position} in {item.path}",
                           "`rmqcore verify` reports every problem; `rmqcore recover` cuts a torn tail")
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

    store = _store_root(args)
    geometry = _full_geometry(args, store) if index else _geometry(args)
    flavour, _why = _detect_flavour(store, getattr(args, "flavour", None))
    return MessageStore(store, read_only=True, message_index_enable=index, flavour=flavour, **geometry)


def _full_geometry(args: argparse.Namespace, store: Path) -> dict[str, Any]:
    """The geometry options plus the index geometry inferred from the index files when neither
    the options nor ``rmqcore.json`` give it."""
    given = _geometry(args)
    saved = _geo.load(store) or {}
    if not ({"index_slots", "index_entries"} & (given.keys() | saved.keys())):
        given.update(_index_geometry(store / "index"))
    return given


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
            raise CliError(f"index file {p} has {size} bytes, which does not fit the default index geometry",
                           "pass --index-slots and --index-entries (the broker's maxHashSlotNum and maxIndexNum)")
    return {}


def _cmd_dump_cq(args: argparse.Namespace) -> int:
    with _open_store(args) as s:
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

    from .errors import StoreClosedError
    from .store import MessageStore

    store = _store_root(args, need_commitlog=False)
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
    with MessageStore(store, read_only=True, follow=True, **_geometry(args)) as s:

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
    tl = sub.add_parser("tail", help="print messages as they arrive, like kafka-console-consumer "
                                     "(a read-only follower)")
    tl.add_argument("store_dir")
    tl.add_argument("--topic", required=True)
    tl.add_argument("--queue", type=int, default=None,
                    help="one queue id (default: every queue of the topic)")
    tl.add_argument("--from", dest="from_", default="latest", metavar="earliest|latest|OFFSET",
                    help="where each queue starts (default latest: only messages published from now on)")
    tl.add_argument("--max", type=int, default=None, help="stop after N messages (default: until Ctrl-C)")
    tl.add_argument("--json", action="store_true", help="one JSON object per message")
    _add_geometry(tl)
    tl.set_defaults(func=_cmd_tail)


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
        if not msgs:
            raise CliError(f"no message of topic {args.topic} has key {args.key!r} in that time window",
                           "check the topic and key (`rmqcore dump commitlog` shows the keys)", EXIT_PROBLEM)
        for m in msgs:
            if args.json:
                _emit(message_to_json(m))
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
    from .verify import verify_store

    store = _store_root(args)
    geometry = _full_geometry(args, store)
    geometry["flavour"] = _detect_flavour(store)[0]
    rep = verify_store(store, progress=_Progress("verify", args.progress), **geometry)
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
    import warnings

    from .errors import RecoveryCutWarning
    from .store import MessageStore

    store = _store_root(args)
    geometry = _full_geometry(args, store)
    flavour, why = _detect_flavour(store, args.flavour)
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
        _emit(out)
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
    store = _store_root(args)
    try:
        import pyarrow  # type: ignore[import-untyped,unused-ignore]  # noqa: F401

        from .columnar.materialize import materialize
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
        _emit(out)
    else:
        rate = rep.commitlog_bytes / 1e6 / rep.seconds if rep.seconds else 0.0
        print(f"{store}: {len(rep.converted)} files converted ({rep.commitlog_bytes:,} bytes of CommitLog -> "
              f"{rep.copy_bytes:,} bytes of Parquet, {rate:.0f} MB/s), {rep.current} already current, "
              f"{rep.unsealed} unsealed (snapshotted by readers, or --tail), "
              f"{rep.pending} left for a later run")
    return 0


def _cmd_offset_by_time(args: argparse.Namespace) -> int:
    with _open_store(args) as s:
        off = s.offset_by_time(args.topic, args.queue, args.time, args.boundary)
    if args.json:
        _emit({"topic": args.topic, "queue_id": args.queue, "time": args.time, "boundary": args.boundary,
               "offset": off})
    else:
        print(off)
    return 0


# -- store state: flavour, checkpoint, lock ---------------------------------------------------------
def _detect_flavour(store: Path, forced: int | None = None) -> tuple[int, str]:
    """Which RocketMQ wrote the store (4 or 5) and why we think so; nothing is written."""
    if forced is not None:
        return forced, "--flavour"
    saved = _geo.load(store) or {}
    if "flavour" in saved:
        return int(saved["flavour"]), "rmqcore.json"
    if (store / "abort.bak").exists():
        return 5, "abort.bak is a 5.x file"
    if (store / "compaction").is_dir():
        return 5, "compaction/ is a 5.x directory"
    abort = store / "abort"
    if abort.is_file() and abort.stat().st_size > 0:
        return 5, "abort holds a PID, as 5.x writes it"
    cp = store / "checkpoint"
    if cp.is_file():
        with open(cp, "rb") as f:
            head = f.read(40)
        if any(head[24:40]):
            return 5, "checkpoint fields 4 and 5 are set"
    return 4, "no RocketMQ 5.x marker (abort.bak, compaction/, PID in abort)"


_CP_NAMES = (("physic_msg_timestamp", "physicMsgTimestamp", True),
             ("logics_msg_timestamp", "logicsMsgTimestamp", True),
             ("index_msg_timestamp", "indexMsgTimestamp", True),
             ("master_flushed_offset", "masterFlushedOffset", False),
             ("confirm_phy_offset", "confirmPhyOffset", False))


def _checkpoint_info(store: Path, flavour: int) -> dict[str, Any] | None:
    """The checkpoint's fields (three for a 4.x layout, five for 5.x); None when there is no file."""
    from .checkpoint import StoreCheckpoint

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
            lines.append(f"{java:<21}{v:>15}  {_iso(v)}" if is_ts else f"{java:<21}{v:>15}")
    lines.append(f"{'minTimestamp':<21}{cp['min_timestamp']:>15}  {_iso(cp['min_timestamp'])}"
                 "  (min(physic, logics) - 3 s: where abnormal recovery starts)")
    return lines


def _lock_state(store: Path) -> dict[str, Any]:
    """Whether another process holds the store's ``lock`` (byte 0, as RocketMQ and rmqcore lock it).

    Asks the kernel with F_GETLK on a read-only descriptor, so nothing is locked or created; ``held``
    is None where that query is not available."""
    import fcntl
    import struct

    from .storelock import held_here

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


def _cmd_dump_checkpoint(args: argparse.Namespace) -> int:
    store = _store_root(args, need_commitlog=False)
    flavour, why = _detect_flavour(store, args.flavour)
    cp = _checkpoint_info(store, flavour)
    if cp is None:
        raise CliError(f"{store} has no checkpoint file",
                       "a store writes it at its first flush or clean close; is this the store root?", EXIT_PROBLEM)
    cp["layout_reason"] = why
    if args.json:
        _emit(cp)
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
    from .indexfile import HEADER_SIZE, IndexHeader

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


def _cmd_info(args: argparse.Namespace) -> int:
    from .store import MessageStore

    store = _store_root(args)
    flavour, flavour_reason = _detect_flavour(store)
    saved = _geo.load(store) or {}
    given = _geometry(args)
    sources: dict[str, str] = {}
    for k in ("commitlog_file_size", "cq_file_size", "index_slots", "index_entries"):
        sources[k] = "option" if k in given else "rmqcore.json" if k in saved else ""
    index_geo: dict[str, int] = {}
    if not sources["index_slots"] and not sources["index_entries"]:
        try:
            index_geo = _index_geometry(store / "index")
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
            "lock": _lock_state(store),
        }
    if args.json:
        _emit(out)
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
        extra = (f"  {max(f['index_count'], 1) - 1} entries, stores {_iso(f['begin_timestamp'])} .. "
                 f"{_iso(f['end_timestamp'])}" if "index_count" in f else "  (no header)")
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
def _cmd_stats(args: argparse.Namespace) -> int:
    with _open_store(args) as s:
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
            _emit(r)
        _emit(total)
        return 0
    w = max([len("topic")] + [len(r["topic"]) for r in rows])
    print(f"{'topic':<{w}} {'queue':>5} {'min':>10} {'max':>10} {'messages':>10} {'bytes':>12}  "
          f"{'earliest store time':<29} latest store time")
    for r in rows:
        print(f"{r['topic']:<{w}} {r['queue_id']:>5} {r['min_offset']:>10} {r['max_offset']:>10} "
              f"{r['messages']:>10} {r['bytes']:>12}  {_iso(r['earliest_store_time'] or 0):<29} "
              f"{_iso(r['latest_store_time'] or 0)}")
    print(f"total: {total['topics']} topics, {total['queues']} queues, {total['messages']} messages, "
          f"{total['bytes']} bytes, stored {_iso(total['earliest_store_time'] or 0)} .. "
          f"{_iso(total['latest_store_time'] or 0)}")
    return 0


# -- bench -----------------------------------------------------------------------------------------
def _cmd_bench(args: argparse.Namespace) -> int:
    import subprocess

    from . import peerbench

    path, tried = peerbench.find_peers_script(args.peers_script)
    if path is None:
        raise CliError(f"the peer benchmark script peers.py was not found (looked at {', '.join(tried)})",
                       "pass --peers-script PATH, or set RMQCORE_SHARED to the directory holding tools/peers.py")
    for opt in ("n", "repeat", "lookups"):
        v = getattr(args, opt)
        if v is not None and v <= 0:
            raise CliError(f"--{opt} must be positive, not {v}", "see `rmqcore bench --help`")
    cmd = [sys.executable, peerbench.__file__]
    for opt in ("n", "peers", "repeat", "lookups", "max_seconds", "workdir", "json"):
        v = getattr(args, opt)
        if v is not None:
            cmd += [f"--{opt.replace('_', '-')}", str(v)]
    env = dict(os.environ, **{peerbench.PEERS_ENV: str(path)})
    pkg_parent = str(Path(peerbench.__file__).resolve().parents[1])
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    sys.stdout.flush()
    rc = subprocess.run(cmd, env=env).returncode
    if rc != 0:
        raise CliError(f"the benchmark exited with status {rc}", "see its messages above", EXIT_PROBLEM)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rmqcore", description=__doc__.splitlines()[0],
                     epilog="Exit status: 0 ok, 1 the store has problems or nothing was found, 2 usage error.")
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

    dcp = dsub.add_parser("checkpoint", help="the checkpoint file's fields (4.x: three, 5.x: five)")
    dcp.add_argument("store_dir")
    dcp.add_argument("--flavour", type=int, choices=(4, 5), default=None,
                     help="read the 4.x (three-field) or 5.x (five-field) layout (default: detected)")
    dcp.add_argument("--json", action="store_true", help="one JSON object")
    dcp.set_defaults(func=_cmd_dump_checkpoint)

    inf = sub.add_parser("info", help="geometry, files, offsets, dispatch lag, checkpoint, abort and lock; read-only")
    inf.add_argument("store_dir")
    inf.add_argument("--json", action="store_true", help="one JSON object")
    _add_geometry(inf)
    inf.set_defaults(func=_cmd_info)

    sts = sub.add_parser("stats", help="messages, offsets, bytes and store times per topic/queue; read-only")
    sts.add_argument("store_dir")
    sts.add_argument("--topic", default=None, help="only this topic's queues")
    sts.add_argument("--json", action="store_true", help="one JSON object per queue, then the totals")
    _add_geometry(sts)
    sts.set_defaults(func=_cmd_stats)

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

    _add_tail(sub)

    ver = sub.add_parser("verify", help="report every problem of a store; changes nothing")
    ver.add_argument("store_dir")
    ver.add_argument("--json", action="store_true", help="one JSON report")
    ver.add_argument("--progress", action="store_true", help="progress bar even when not on a terminal")
    _add_geometry(ver)
    ver.set_defaults(func=_cmd_verify)

    rec = sub.add_parser("recover", help="recover a store in place as opening it would, then close it cleanly")
    rec.add_argument("store_dir")
    rec.add_argument("--flavour", type=int, choices=(4, 5), default=None,
                     help="RocketMQ bytes for files recovery writes (checkpoint, abort): 4 or 5 "
                          "(default: rmqcore.json, else detected from the checkpoint layout and abort file)")
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
    obt.add_argument("--json", action="store_true", help="one JSON object")
    _add_geometry(obt)
    obt.set_defaults(func=_cmd_offset_by_time)

    mat = sub.add_parser("materialize", help="Parquet copies of sealed CommitLog files (rmqcore-columnar/)",
                         description="Needs pyarrow. Only sealed files are read: the store may be open.")
    mat.add_argument("store_dir")
    mat.add_argument("--max-files", type=int, default=None, help="convert at most N files, oldest first")
    mat.add_argument("--tail", action="store_true",
                     help="also snapshot what no sealed copy holds now (a store no longer written)")
    mat.add_argument("--compression", default="snappy", choices=("snappy", "zstd", "lz4", "gzip", "none"))
    mat.add_argument("--commitlog-file-size", type=int, default=None,
                     help="bytes per commitlog file (default: rmqcore.json, else the files, else 1 GiB)")
    mat.add_argument("--json", action="store_true", help="one JSON report")
    mat.set_defaults(func=_cmd_materialize)

    try:
        from .kafka import cli as kafka_cli
    except ImportError:
        kafka_cli = None  # type: ignore[assignment]
    if kafka_cli is not None and hasattr(kafka_cli, "register"):
        kafka_cli.register(sub)

    bch = sub.add_parser("bench", help="rmqcore beside sqlite3, lmdb, rocksdict... on one workload (peers.py)")
    bch.add_argument("--n", type=int, default=None, help="messages per workload (peers.py default 200,000)")
    bch.add_argument("--peers", default=None, help="comma-separated peers (default: every one peers.py knows)")
    bch.add_argument("--repeat", type=int, default=None, help="repetitions per peer (default 3)")
    bch.add_argument("--lookups", type=int, default=None, help="W3 key lookups (default 1,000,000)")
    bch.add_argument("--max-seconds", type=float, default=None, help="cap per workload per run (default 60)")
    bch.add_argument("--workdir", default=None, help="where the peers' stores go (default: a temp dir)")
    bch.add_argument("--json", metavar="PATH", default=None, help="also write every run and the summary here")
    bch.add_argument("--peers-script", metavar="PATH", default=None,
                     help="shared/tools/peers.py (default: $RMQCORE_SHARED/tools/peers.py, then beside the checkout)")
    bch.set_defaults(func=_cmd_bench)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run a parsed command; every failure becomes one stderr line and an exit status (module docstring)."""
    try:
        return int(args.func(args))
    except CliError as e:
        _say_error(e.what, e.todo)
        return e.code
    except StoreLockedError as e:
        _say_error(str(e), f"stop the process that has the store open, or use a read-only command ({READ_ONLY_COMMANDS})")
        return EXIT_PROBLEM
    except CorruptionError as e:
        if args.command == "recover":  # recovery itself stopped there: running it again would too
            _say_error(str(e), "recovery cannot repair this file; `rmqcore verify STORE_DIR` reports every "
                               "problem: move the damaged file aside or restore it from a copy")
        else:
            _say_error(str(e), "`rmqcore verify STORE_DIR` reports every problem; "
                               "`rmqcore recover STORE_DIR` cuts a torn tail")
        return EXIT_PROBLEM
    except MissingCodecError as e:  # a compressed body or batch: not corruption, a missing package
        _say_error(str(e), "pip install 'rmqcore[kafka]', then run the command again")
        return EXIT_USAGE
    except ConfigError as e:
        _say_error(str(e), "check --commitlog-file-size, --cq-file-size, --index-slots and --index-entries "
                           "against the broker's settings (they default to rmqcore.json, then the files)")
        return EXIT_USAGE
    except (InvalidMessageError, OffsetOutOfRangeError) as e:
        _say_error(str(e), f"check the arguments (`rmqcore {args.command} --help`)")
        return EXIT_USAGE
    except RmqError as e:
        _say_error(str(e), "`rmqcore verify STORE_DIR` reports the state of a store")
        return EXIT_PROBLEM
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep Python from complaining at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:
        what = f"{e.strerror or e}: {e.filename}" if e.filename else str(e.strerror or e)
        _say_error(what, "check the path and its permissions")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say_error("interrupted", "run the command again (recover too: recovery can be repeated)")
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
