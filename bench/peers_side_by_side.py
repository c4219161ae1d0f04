#!/usr/bin/env python3
"""rmqcore beside lmdb, rocksdict, sqlite3 (and the other peers) on the identical workload of
``shared/tools/peers.py`` (W1 single appends, W2 read-back, W3 key lookups, W4 batches of 1000),
each peer and repetition in a fresh child process and directory.

Run (peers that are not installed are reported as missing):
    pip install lmdb rocksdict
    python bench/peers_side_by_side.py --peers rmqcore,lmdb,rocksdict,sqlite3,ref.pyfile --n 200000 --repeat 3

The rmqcore peer is a MessageStore with RocketMQ's default geometry (1 GiB CommitLog files,
index on): W1 = ``put(topic, body, queue, tags=, keys=)`` per message (dispatch builds consume
queues, the key index and segment indexes before the first read); W2 = columnar read-back of every
record with CRC verification; W3 = ``query_by_key`` (index walk + key re-check against the record)
returning the body; W4 = ``put_batch`` with one properties string per message (KEYS, TAGS).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
TOOLS = Path(os.environ.get("RMQCORE_SHARED", HERE.parents[2] / "shared")) / "tools"
sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(HERE.parents[1]))

import peers as P  # noqa: E402

from rmqcore.store import MessageStore  # noqa: E402

TOPIC = "BenchTopic"


class RmqCore(P.Peer):
    name = "rmqcore"
    keyed = True
    batch = True

    def open(self) -> None:
        self.store = MessageStore(self.path, commitlog_file_size=256 * 1024 * 1024, message_index_enable=True)
        self.put = self.store.put

    def append(self, key, tag, body, i):  # noqa: ANN001
        self.put(TOPIC, body, i & 3, tags=tag, keys=key)

    def append_batch(self, keys, tags, bodies, lo, hi):  # noqa: ANN001
        raw = [f"KEYS\x01{keys[j]}\x02TAGS\x01{tags[j]}\x02" for j in range(lo, hi)]
        self.store.put_batch(TOPIC, bodies[lo:hi], lo & 3, properties_raw=raw)

    def close(self) -> None:
        self.store.close()

    def reopen(self) -> None:
        self.store = MessageStore(self.path)
        self.store.dispatch()

    def read_all(self, n, deadline=float("inf")):  # noqa: ANN001
        cl = self.store.commitlog
        off, c = cl.min_offset, 0
        while off < cl.max_offset:
            b = cl.read_batch(off, 8192, verify_crc=True)
            b.bodies()
            c += len(b)
            off = b.next_offset
        return c

    def lookup(self, key):  # noqa: ANN001
        return self.store.query_by_key(TOPIC, key)[0].body


P.PEER_CLASSES["rmqcore"] = RmqCore
P.NOTES["rmqcore"] = (__doc__ or "").split("\n\n")[2].replace("\n", " ")
P.ALL_PEERS.insert(0, "rmqcore")
_importable = P.importable
P.importable = lambda name: True if name == "rmqcore" else _importable(name)
P.__file__ = str(HERE)  # children re-run this script, which registers rmqcore again

if __name__ == "__main__":
    P.main()
