"""``rmqcore kafka dump|lookup PARTITION_DIR``: read Kafka partition directories from the shell.

* ``dump PARTITION_DIR [--json]`` prints every batch (followed by its records) of every segment,
  then the segment's offset-index and time-index entries (every slot Kafka counts as an entry).
  JSON lines::

    {"type": "batch", "segment", "position", "size", "magic", "base_offset", "last_offset",
     "max_timestamp", "crc_valid", "compression", "record_count"}
    {"type": "record", "offset", "timestamp", "key", "value"}
    {"type": "offset_index", "segment", "offset", "position"}
    {"type": "time_index", "segment", "timestamp", "offset"}

  ``segment`` is the segment's base offset; key and value are text when every byte is printable
  ASCII, else hex, and null when absent.
* ``lookup PARTITION_DIR --offset N [--json]`` prints ``{"batch_last_offset", "position", "batch_size"}``
  (LogSegment.translateOffset across segments; nulls when none); ``--timestamp MS`` prints
  ``{"timestamp", "offset"}`` (findOffsetByTimestamp; nulls when none).

Exit status: 0 success, 1 corrupt data (message on stderr with path and offset), 2 usage errors and a
compressed batch whose codec is not installed (``pip install 'rmqcore[kafka]'``); ``dump`` shows every
batch it can before reporting. Errors are one line, ``rmqcore: error: <what happened>; <what to do>``
(see :mod:`rmqcore.cli`): the first problem met, and how many more there were.
The ``rmqcore`` command mounts this through :func:`register`; ``python -m rmqcore.kafka.cli`` (a
name kept for it) runs it standalone through :func:`main`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from ..errors import MissingCodecError, RmqError
from ..kafka.log import KafkaLog
from ..kafka.records import Record, RecordBatch, read_batch
from ..kafka.segment import LogSegment
from .common import Parser, run, say_error

__all__ = ["register", "main", "cmd_dump", "cmd_lookup", "bytes_to_json"]


def bytes_to_json(b: bytes | None) -> str | None:
    """Text when every byte is printable ASCII, else lowercase hex; None stays None."""
    if b is None:
        return None
    if all(0x20 <= c < 0x7F for c in b):
        return b.decode("ascii")
    return b.hex()


def _batch_obj(seg: LogSegment, b: RecordBatch, records: list[Record] | None) -> dict[str, Any]:
    if b.magic >= 2:
        count: int | None = b.count
    else:
        count = len(records) if records is not None else None
    try:
        base = b.base_offset
    except RmqError:
        base = None
    return {
        "type": "batch",
        "segment": seg.base_offset,
        "position": b.position,
        "size": b.size,
        "magic": b.magic,
        "base_offset": base,
        "last_offset": b.last_offset,
        "max_timestamp": b.max_timestamp,
        "crc_valid": b.crc_valid,
        "compression": b.compression,
        "record_count": count,
    }


class _Out:
    def __init__(self, stream: TextIO, as_json: bool) -> None:
        self.stream = stream
        self.json = as_json

    def emit(self, obj: dict[str, Any], text: str) -> None:
        if self.json:
            self.stream.write(json.dumps(obj, ensure_ascii=False, separators=(", ", ": ")) + "\n")
        else:
            self.stream.write(text + "\n")


def _text_kv(v: str | None) -> str:
    return "null" if v is None else v


class _Problem(NamedTuple):
    """What ``dump`` met: one stderr line for the first of them, and the exit status."""

    what: str
    todo: str
    code: int


_CORRUPT_TODO = "Kafka's recovery would truncate the segment there; the data before it is readable"
_CODEC_TODO = "pip install 'rmqcore[kafka]', then run the command again"


def _corrupt(what: str) -> _Problem:
    return _Problem(f"corrupt data: {what}", _CORRUPT_TODO, 1)


def _codec_missing(e: MissingCodecError, where: str) -> _Problem:
    return _Problem(f"{e} ({where})", _CODEC_TODO, 2)


def _dump_segment(seg: LogSegment, out: _Out, errors: list[_Problem]) -> None:
    if not out.json:
        out.stream.write(f"Dumping {seg.log.path} (base offset {seg.base_offset}, {seg.size} bytes)\n")
    hdrs, stop, status = seg.batch_headers(0, crc_mode=0)
    buf = seg.log.view()
    for h in hdrs:
        b = read_batch(buf, h.position, h.size, h.magic, seg._impl, str(seg.log.path))
        records: list[Record] | None
        try:
            records = b.records()
            rec_err = None
        except RmqError as exc:
            records = None
            rec_err = exc
        obj = _batch_obj(seg, b, records)
        out.emit(
            obj,
            f"batch position: {b.position} size: {b.size} magic: {b.magic} baseOffset: {obj['base_offset']} "
            f"lastOffset: {b.last_offset} maxTimestamp: {b.max_timestamp} "
            f"crcValid: {str(b.crc_valid).lower()} compression: {b.compression} "
            f"count: {'null' if obj['record_count'] is None else obj['record_count']}",
        )
        if isinstance(rec_err, MissingCodecError):  # not corruption: the optional codec is missing
            errors.append(_codec_missing(rec_err, f"{seg.log.path}, offset {b.position}"))
            continue
        if rec_err is not None:
            errors.append(_corrupt(str(rec_err)))
            continue
        for r in records or ():
            key, value = bytes_to_json(r.key), bytes_to_json(r.value)
            out.emit(
                {"type": "record", "offset": r.offset, "timestamp": r.timestamp, "key": key, "value": value},
                f"| offset: {r.offset} timestamp: {r.timestamp} "
                f"key: {_text_kv(key)} value: {_text_kv(value)}",
            )
    if status < 0:
        try:
            seg._raise(status, buf, stop)
        except RmqError as err:
            errors.append(_corrupt(str(err)))
    elif stop < seg.size:
        errors.append(_corrupt(
            f"{seg.size - stop} bytes at the end do not form a complete batch ({seg.log.path}, offset {stop})"
        ))
    del buf
    if not out.json:
        out.stream.write(f"Dumping {seg.offset_index.path} ({seg.offset_index.entries} entries)\n")
    for oe in seg.offset_index.entries_list():
        out.emit(
            {
                "type": "offset_index",
                "segment": seg.base_offset,
                "offset": oe.offset,
                "position": oe.position,
            },
            f"offset: {oe.offset} position: {oe.position}",
        )
    if not out.json:
        out.stream.write(f"Dumping {seg.time_index.path} ({seg.time_index.entries} entries)\n")
    for t in seg.time_index.entries_list():
        out.emit(
            {"type": "time_index", "segment": seg.base_offset, "timestamp": t.timestamp, "offset": t.offset},
            f"timestamp: {t.timestamp} offset: {t.offset}",
        )


def _open_log(args: argparse.Namespace) -> KafkaLog | int:
    d = Path(args.partition_dir)
    if not d.is_dir():
        what = "does not exist" if not d.exists() else "is not a directory"
        say_error(f"{d} {what}", "pass a Kafka partition directory (the one holding 00000000000000000000.log)")
        return 2
    return KafkaLog(d, writable=False)


def cmd_dump(args: argparse.Namespace) -> int:
    """``dump``: every batch, record and index entry. Returns the exit code."""
    log = _open_log(args)
    if isinstance(log, int):
        return log
    out = _Out(sys.stdout, args.json)
    errors: list[_Problem] = []
    try:
        for seg in log.segments:
            _dump_segment(seg, out, errors)
    finally:
        log.close()
    sys.stdout.flush()
    if not errors:
        return 0
    first = errors[0]  # one line: the first problem, and how many more there were
    n = len(errors) - 1
    more = f" (and {n} more problem{'s' if n > 1 else ''} after it)" if n else ""
    say_error(first.what + more, first.todo)
    return first.code


def cmd_lookup(args: argparse.Namespace) -> int:
    """``lookup``: translate an offset or find an offset by timestamp. Returns the exit code."""
    log = _open_log(args)
    if isinstance(log, int):
        return log
    try:
        if args.offset is not None:
            found = log.translate_offset(args.offset)
            if found is None:
                obj: dict[str, Any] = {"batch_last_offset": None, "position": None, "batch_size": None}
                text = f"no batch at or after offset {args.offset}"
            else:
                seg, t = found
                obj = {"batch_last_offset": t.offset, "position": t.position, "batch_size": t.size}
                text = (
                    f"offset {args.offset}: batch at position {t.position} of {seg.log.path.name} "
                    f"(size {t.size}, last offset {t.offset})"
                )
        else:
            r = log.find_offset_by_timestamp(args.timestamp)
            if r is None:
                obj = {"timestamp": None, "offset": None}
                text = f"no record with timestamp >= {args.timestamp}"
            else:
                obj = {"timestamp": r.timestamp, "offset": r.offset}
                text = f"timestamp {args.timestamp}: offset {r.offset} (record timestamp {r.timestamp})"
    except MissingCodecError as e:
        say_error(str(e), _CODEC_TODO)
        return 2
    except RmqError as e:
        say_error(f"corrupt data: {e}", _CORRUPT_TODO)
        return 1
    finally:
        log.close()
    sys.stdout.write((json.dumps(obj) if args.json else text) + "\n")
    return 0


def _add_commands(sub: Any) -> None:
    d = sub.add_parser("dump", help="print every batch, record and index entry of a partition directory")
    d.add_argument("partition_dir", metavar="PARTITION_DIR")
    d.add_argument("--json", action="store_true", help="one JSON object per line")
    d.set_defaults(func=cmd_dump, kafka_command="dump")
    lk = sub.add_parser("lookup", help="answer an offset or timestamp lookup as Kafka's LogSegment does")
    lk.add_argument("partition_dir", metavar="PARTITION_DIR")
    g = lk.add_mutually_exclusive_group(required=True)
    g.add_argument("--offset", type=int, help="position of the batch holding this offset")
    g.add_argument("--timestamp", type=int, metavar="MS", help="earliest offset with timestamp >= MS")
    lk.add_argument("--json", action="store_true", help="print a JSON object")
    lk.set_defaults(func=cmd_lookup, kafka_command="lookup")


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``kafka`` sub-command (with ``dump`` and ``lookup``) to an argparse subparsers object.

    Each leaf parser sets ``func`` to a callable taking the parsed args and returning the exit code.
    """
    p: argparse.ArgumentParser = subparsers.add_parser("kafka", help="read Kafka partition directories")
    sub = p.add_subparsers(dest="kafka_command", metavar="{dump,lookup}")
    sub.required = True
    _add_commands(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m rmqcore.kafka.cli dump|lookup ...`` (``rmqcore kafka`` alone)."""
    parser = Parser(prog="rmqcore kafka", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="kafka_command", metavar="{dump,lookup}")
    sub.required = True
    _add_commands(sub)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # argparse: 2 for usage errors, 0 for --help
        return int(e.code) if isinstance(e.code, int) else 2
    args.command = "kafka"
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
