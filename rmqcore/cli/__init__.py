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
import sys
from collections.abc import Sequence

from . import bench, rocketmq
from .common import EXIT_OK, EXIT_PROBLEM, EXIT_USAGE, CliError, Parser, run
from .rocketmq import message_to_json

__all__ = ["main", "run", "build_parser", "message_to_json", "CliError", "EXIT_OK", "EXIT_PROBLEM", "EXIT_USAGE"]


def build_parser() -> argparse.ArgumentParser:
    """The ``rmqcore`` parser: the RocketMQ commands, ``kafka`` (when its package imports) and ``bench``."""
    parser = Parser(prog="rmqcore", description=__doc__.splitlines()[0],
                    epilog="Exit status: 0 ok, 1 the store has problems or nothing was found, 2 usage error.")
    sub = parser.add_subparsers(dest="command", required=True)
    rocketmq.register(sub)
    try:
        from . import kafka
    except ImportError:
        pass
    else:
        kafka.register(sub)
    bench.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
