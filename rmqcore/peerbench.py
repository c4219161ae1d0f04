"""rmqcore beside lmdb, rocksdict, sqlite3 (and the other peers) on the identical workload of
``shared/tools/peers.py`` (W1 single appends, W2 read-back, W3 key lookups, W4 batches of 1000),
each peer and repetition in a fresh child process and directory.

``peers.py`` is not part of the package: :func:`find_peers_script` looks for it (``--peers-script``,
then ``$RMQCORE_SHARED/tools/peers.py``, then ``shared/tools/peers.py`` beside the checkout).
``rmqcore bench`` and ``bench/peers_side_by_side.py`` run this module as a script; peers.py re-runs
it for every child (``peers.__file__`` is pointed here), which registers the rmqcore peer again.

The rmqcore peer is a MessageStore with 256 MiB CommitLog files and the index on: W1 =
``put(topic, body, queue, tags=, keys=)`` per message (dispatch builds consume queues, the key index
and segment indexes before the first read); W2 = columnar read-back of every record with CRC
verification; W3 = ``lookup`` (one native call: index walk, CRC and key re-check against the record)
returning the body; W4 = ``put_batch`` with each message's key and tag (``keys=``, ``tags=`` lists).
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":  # run as a script: the package directory must not shadow top-level modules
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]

import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import Any  # noqa: E402

__all__ = ["PEERS_ENV", "find_peers_script", "load_peers", "main"]

PEERS_ENV = "RMQCORE_PEERS_SCRIPT"  # set for the children: where peers.py is
TOPIC = "BenchTopic"


def find_peers_script(option: str | None = None) -> tuple[Path | None, list[str]]:
    """Where peers.py is, and every place looked at (in order)."""
    tried: list[Path] = []
    if option:
        tried.append(Path(option))
    else:
        if os.environ.get(PEERS_ENV):
            tried.append(Path(os.environ[PEERS_ENV]))
        if os.environ.get("RMQCORE_SHARED"):
            tried.append(Path(os.environ["RMQCORE_SHARED"]) / "tools" / "peers.py")
        tried.append(Path(__file__).resolve().parents[2] / "shared" / "tools" / "peers.py")
    for p in tried:
        if p.is_file():
            return p.resolve(), [str(t) for t in tried]
    return None, [str(t) for t in tried]


def load_peers(path: Path) -> ModuleType:
    """Import peers.py from ``path`` as the module ``peers``."""
    spec = importlib.util.spec_from_file_location("peers", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["peers"] = mod
    spec.loader.exec_module(mod)
    return mod


def _register(P: Any) -> None:
    from rmqcore.store import MessageStore

    class RmqCore(P.Peer):  # type: ignore[misc]
        name = "rmqcore"
        keyed = True
        batch = True

        def open(self) -> None:
            self.store = MessageStore(self.path, commitlog_file_size=256 * 1024 * 1024, message_index_enable=True)
            self.put = self.store.put

        def append(self, key: str, tag: str, body: bytes, i: int) -> None:
            self.put(TOPIC, body, i & 3, tags=tag, keys=key)

        def append_batch(self, keys: list[str], tags: list[str], bodies: list[bytes], lo: int, hi: int) -> None:
            self.store.put_batch(TOPIC, bodies[lo:hi], lo & 3, keys=keys[lo:hi], tags=tags[lo:hi])

        def close(self) -> None:
            self.store.close()

        def reopen(self) -> None:
            self.store = MessageStore(self.path)
            self.store.dispatch()

        def read_all(self, n: int, deadline: float = float("inf")) -> int:
            cl = self.store.commitlog
            off, c = cl.min_offset, 0
            while off < cl.max_offset:
                b = cl.read_batch(off, 8192, verify_crc=True)
                b.bodies()
                c += len(b)
                off = b.next_offset
            return c

        def lookup(self, key: str) -> Any:
            return self.store.lookup(TOPIC, key)

    P.PEER_CLASSES["rmqcore"] = RmqCore
    P.NOTES["rmqcore"] = (__doc__ or "").split("\n\n")[2].replace("\n", " ")
    if "rmqcore" not in P.ALL_PEERS:
        P.ALL_PEERS.insert(0, "rmqcore")
    importable = P.importable
    P.importable = lambda name: True if name == "rmqcore" else importable(name)
    P.__file__ = os.path.abspath(__file__)  # children re-run this module, which registers rmqcore again


def main(script: str | os.PathLike[str] | None = None) -> None:
    """Run peers.py's command line (``sys.argv``) with the rmqcore peer registered.

    Raises:
        FileNotFoundError: peers.py is not where ``script`` / the environment says.
    """
    path, tried = find_peers_script(str(script) if script else None)
    if path is None:
        raise FileNotFoundError(f"peers.py not found (looked at {', '.join(tried)})")
    os.environ[PEERS_ENV] = str(path)
    # children import rmqcore from where this process did, whatever their sys.path[0]
    pkg_parent = str(Path(__file__).resolve().parents[1])
    pp = os.environ.get("PYTHONPATH", "")
    if pkg_parent not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = pkg_parent + (os.pathsep + pp if pp else "")
    P = load_peers(path)
    _register(P)
    P.main()


if __name__ == "__main__":
    try:
        main()
    except FileNotFoundError as e:
        sys.exit(f"rmqcore: error: {e}; set RMQCORE_SHARED to the shared/ directory or {PEERS_ENV} to peers.py")
