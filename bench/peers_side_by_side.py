#!/usr/bin/env python3
"""rmqcore beside lmdb, rocksdict, sqlite3 (and the other peers) on the identical workload of
``shared/tools/peers.py`` (W1 single appends, W2 read-back, W3 key lookups, W4 batches of 1000),
each peer and repetition in a fresh child process and directory.

Run (peers that are not installed are reported as missing):
    pip install lmdb rocksdict
    python bench/peers_side_by_side.py --peers rmqcore,lmdb,rocksdict,sqlite3,ref.pyfile --n 200000 --repeat 3
or, the same from an installed package: ``rmqcore bench --peers ... --n 200000 --repeat 3``.

The rmqcore peer lives in ``rmqcore/peerbench.py`` (what it measures is described there); peers.py
is found through RMQCORE_SHARED, else ``../shared/tools/peers.py`` beside this checkout.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rmqcore import peerbench  # noqa: E402

if __name__ == "__main__":
    try:
        peerbench.main()
    except FileNotFoundError as e:
        sys.exit(f"rmqcore: error: {e}; set RMQCORE_SHARED to the shared/ directory")
