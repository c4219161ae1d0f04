"""``rmqcore kafka dump|lookup``: the command lives in :mod:`rmqcore.cli.kafka`; this name stays for
``python -m rmqcore.kafka.cli`` and for code that imports it."""
from __future__ import annotations

import sys

from ..cli.kafka import bytes_to_json, cmd_dump, cmd_lookup, main, register

__all__ = ["register", "main", "cmd_dump", "cmd_lookup", "bytes_to_json"]

if __name__ == "__main__":
    sys.exit(main())
