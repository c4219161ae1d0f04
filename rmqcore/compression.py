"""Body compression as RocketMQ marks it: SYSFLAG bit 0 = compressed, bits 8-10 = type.

Type 0 (legacy writers) and 3 are zlib, 1 is LZ4 (frame format, lz4-java), 2 is ZSTD. The store
keeps bodies exactly as given; this only helps readers. LZ4/ZSTD need ``cramjam``
(``pip install rmqcore[kafka]``).
"""
from __future__ import annotations

import zlib
from typing import Any

from . import layout as L
from .errors import CorruptionError, MissingCodecError

__all__ = ["compression_type", "decompress_body"]


def compression_type(sys_flag: int) -> str | None:
    """``"ZLIB"``, ``"LZ4"``, ``"ZSTD"`` for a compressed body, None otherwise."""
    if not sys_flag & L.FLAG_COMPRESSED:
        return None
    t = (sys_flag & L.COMPRESSION_TYPE_MASK) >> 8
    name = L.COMPRESSION_NAMES.get(t)
    if name is None:
        raise CorruptionError(f"unknown compression type {t} in sysflag {sys_flag:#x}")
    return name.upper()


def _cramjam() -> Any:  # the optional codec module (pip install rmqcore[kafka])
    try:
        import cramjam
    except ImportError:
        raise MissingCodecError(
            "this body is LZ4/ZSTD compressed and its codec (cramjam) is not installed: "
            "install rmqcore[kafka]"
        ) from None
    return cramjam


def decompress_body(sys_flag: int, body: bytes) -> bytes:
    """The uncompressed body (the body itself when SYSFLAG says it is not compressed)."""
    kind = compression_type(sys_flag)
    try:
        if kind is None:
            return body
        if kind == "ZLIB":
            return zlib.decompress(body)
        if kind == "LZ4":
            return bytes(_cramjam().lz4.decompress(body))
        return bytes(_cramjam().zstd.decompress(body))
    except MissingCodecError:
        raise
    except Exception as e:  # codec libraries raise their own types; report one class
        raise CorruptionError(f"{kind} body does not decompress: {e}") from None
