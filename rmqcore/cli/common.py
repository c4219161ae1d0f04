"""What every ``rmqcore`` command shares: exit statuses, the one-line error, the parser class, the
exception-to-status mapping (``run``), and the RocketMQ store options (root, geometry, flavour).

A leaf of the ``rmqcore.cli`` package: the command modules import it, it imports none of them.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from .. import geometry as _geo
from .. import layout as L
from ..errors import (
    ConfigError,
    CorruptionError,
    InvalidMessageError,
    MissingCodecError,
    OffsetOutOfRangeError,
    RmqError,
    StoreLockedError,
)

__all__ = [
    "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE", "READ_ONLY_COMMANDS", "CliError", "Parser", "add_geometry",
    "detect_flavour", "emit", "error_line", "full_geometry", "given_geometry", "index_geometry", "iso",
    "open_store", "run", "say_error", "store_command", "store_root",
]


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


def say_error(what: str, todo: str) -> None:
    sys.stderr.write(error_line(what, todo) + "\n")
    sys.stderr.flush()


class Parser(argparse.ArgumentParser):
    """argparse with rmqcore's one-line usage errors (exit 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, error_line(message, f"see `{self.prog} --help`") + "\n")


def store_root(args: argparse.Namespace, need_commitlog: bool = True) -> Path:
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


def iso(ms: int) -> str:
    """A store time (ms since the epoch) as ISO 8601 UTC; ``-`` for 0 (never set)."""
    if ms <= 0:
        return "-"
    try:
        return _dt.datetime.fromtimestamp(ms / 1000, tz=_dt.timezone.utc).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return "out of range"


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def add_geometry(p: argparse.ArgumentParser) -> None:
    p.add_argument("--commitlog-file-size", type=int, default=None,
                   help="bytes per commitlog file (default: rmqcore.json, else the files, else 1 GiB)")
    p.add_argument("--cq-file-size", type=int, default=None,
                   help="bytes per consume queue file (default: rmqcore.json, else the files, else 6,000,000)")
    p.add_argument("--index-slots", type=int, default=None, help="index hash slots (default 5,000,000)")
    p.add_argument("--index-entries", type=int, default=None, help="index entries per file (default 20,000,000)")


@contextmanager
def store_command(
    sub: Any, name: str, func: Callable[[argparse.Namespace], int], *, geometry: bool = True, **parser: Any
) -> Iterator[argparse.ArgumentParser]:
    """Register command ``name STORE_DIR ...`` that runs ``func``: the ``with`` block adds the command's
    own arguments (in the order its help lists them) between the store directory and the geometry
    options (:func:`add_geometry`, unless ``geometry`` is false). ``parser``: ``add_parser``'s
    keywords (``help``, ``description``)."""
    p = sub.add_parser(name, **parser)
    p.add_argument("store_dir")
    yield p
    if geometry:
        add_geometry(p)
    p.set_defaults(func=func)


def given_geometry(args: argparse.Namespace) -> dict[str, Any]:
    out = {}
    for k in ("commitlog_file_size", "cq_file_size", "index_slots", "index_entries"):
        v = getattr(args, k, None)
        if v is not None:
            out[k] = v
    return out


def open_store(args: argparse.Namespace, index: bool = False) -> Any:
    from ..store import MessageStore

    store = store_root(args)
    geometry = full_geometry(args, store) if index else given_geometry(args)
    flavour, _why = detect_flavour(store, getattr(args, "flavour", None))
    return MessageStore(store, read_only=True, message_index_enable=index, flavour=flavour, **geometry)


def full_geometry(args: argparse.Namespace, store: Path) -> dict[str, Any]:
    """The geometry options plus the index geometry inferred from the index files when neither
    the options nor ``rmqcore.json`` give it."""
    given = given_geometry(args)
    saved = _geo.load(store) or {}
    if not ({"index_slots", "index_entries"} & (given.keys() | saved.keys())):
        given.update(index_geometry(store / "index"))
    return given


def index_geometry(directory: Path) -> dict[str, int]:
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


# -- store state: flavour, checkpoint, lock ---------------------------------------------------------
def detect_flavour(store: Path, forced: int | None = None) -> tuple[int, str]:
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


def run(args: argparse.Namespace) -> int:
    """Run a parsed command; every failure becomes one stderr line and an exit status (module docstring)."""
    try:
        return int(args.func(args))
    except CliError as e:
        say_error(e.what, e.todo)
        return e.code
    except StoreLockedError as e:
        say_error(str(e), f"stop the process that has the store open, or use a read-only command ({READ_ONLY_COMMANDS})")
        return EXIT_PROBLEM
    except CorruptionError as e:
        if args.command == "recover":  # recovery itself stopped there: running it again would too
            say_error(str(e), "recovery cannot repair this file; `rmqcore verify STORE_DIR` reports every "
                               "problem: move the damaged file aside or restore it from a copy")
        else:
            say_error(str(e), "`rmqcore verify STORE_DIR` reports every problem; "
                               "`rmqcore recover STORE_DIR` cuts a torn tail")
        return EXIT_PROBLEM
    except MissingCodecError as e:  # a compressed body or batch: not corruption, a missing package
        say_error(str(e), "pip install 'rmqcore[kafka]', then run the command again")
        return EXIT_USAGE
    except ConfigError as e:
        say_error(str(e), "check --commitlog-file-size, --cq-file-size, --index-slots and --index-entries "
                           "against the broker's settings (they default to rmqcore.json, then the files)")
        return EXIT_USAGE
    except (InvalidMessageError, OffsetOutOfRangeError) as e:
        say_error(str(e), f"check the arguments (`rmqcore {args.command} --help`)")
        return EXIT_USAGE
    except RmqError as e:
        say_error(str(e), "`rmqcore verify STORE_DIR` reports the state of a store")
        return EXIT_PROBLEM
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep Python from complaining at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    except OSError as e:
        what = f"{e.strerror or e}: {e.filename}" if e.filename else str(e.strerror or e)
        say_error(what, "check the path and its permissions")
        return EXIT_USAGE
    except KeyboardInterrupt:
        say_error("interrupted", "run the command again (recover too: recovery can be repeated)")
        return 130
