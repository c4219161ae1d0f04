"""Helpers to read the golden stores' manifests and dumps (shared/fixtures/rocketmq)."""
from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

from tests.conftest import read_jsonl_gz

GEOMETRY = {"file_size": 131072}


def load(version_dir: Path, store: str, kind: str) -> list[dict[str, Any]]:
    return read_jsonl_gz(version_dir / f"store{store}.{kind}.jsonl.gz")


def gen_body(kind: str, i: int, n: int) -> bytes:
    if kind == "pattern":
        return bytes((i * 131 + j * 7 + (j >> 8)) & 0xFF for j in range(n))
    if kind == "text":
        unit = f"rmq-oracle body seed={i} 中文 ".encode()
        return (unit * (n // len(unit) + 1))[:n]
    raise ValueError(kind)


def body_of(put: dict[str, Any]) -> bytes:
    """The stored body of a manifest put line, checked against its sha256."""
    if "body_b64" in put:
        body = base64.b64decode(put["body_b64"])
        assert hashlib.sha256(body).hexdigest() == put["body_sha256"]
        return body
    # the generator index: "gen i=N" in the note, else the number in the "seq" property ("C285")
    candidates = [int(x) for x in re.findall(r"gen i=(\d+)", put.get("note", ""))]
    candidates += [int(x) for x in re.findall(r"seq\x01C?(\d+)", put.get("properties_stored", ""))]
    candidates.append(int(put["seq"]))
    for i in candidates:
        body = gen_body(put["body_gen"], i, put["body_len"])
        if hashlib.sha256(body).hexdigest() == put["body_sha256"]:
            return body
    raise AssertionError(f"cannot rebuild the body of seq {put['seq']}")
