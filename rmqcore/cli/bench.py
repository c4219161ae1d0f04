"""``rmqcore bench``: rmqcore beside its peers (sqlite3, lmdb, rocksdict...) on one workload."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .common import EXIT_OK, EXIT_PROBLEM, CliError

__all__ = ["cmd_bench", "register"]


# -- bench -----------------------------------------------------------------------------------------
def cmd_bench(args: argparse.Namespace) -> int:
    import subprocess

    from .. import peerbench

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


def register(sub: Any) -> None:
    """Add ``bench`` to the ``rmqcore`` parser's subparsers."""
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
    bch.set_defaults(func=cmd_bench)
