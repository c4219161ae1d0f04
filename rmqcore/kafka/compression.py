"""Kafka's batch compression codecs, as Kafka writes them.

| id | name   | on-disk form                                                                     |
| -: | ------ | -------------------------------------------------------------------------------- |
| 0  | none   | records as they are                                                              |
| 1  | gzip   | a standard gzip stream (``GZIPOutputStream``); stdlib ``zlib``                    |
| 2  | snappy | xerial ``SnappyOutputStream`` framing: ``82 'SNAPPY' 00``, int32 version, int32   |
|    |        | compatible version, then ``int32 length | raw snappy block`` chunks. Raw snappy   |
|    |        | blocks and the official framing format (``ff 06 00 00 'sNaPpY'``) are read too.   |
| 3  | lz4    | an LZ4 *frame* (``KafkaLZ4BlockOutputStream``). Magic-0 messages carry a wrong    |
|    |        | header checksum (KIP-57, computed over the magic as well); it is repaired first. |
| 4  | zstd   | a standard zstd frame (v2 batches only)                                          |

snappy, lz4 and zstd need the ``cramjam`` package; without it :class:`~rmqcore.errors.MissingCodecError`
says ``install rmqcore[kafka]``. A payload that does not decompress raises
:class:`~rmqcore.errors.CorruptionError`.
"""

from __future__ import annotations

import struct
import zlib
from types import ModuleType
from typing import Any

from rmqcore.errors import ConfigError, CorruptionError, MissingCodecError

__all__ = ["CODEC_NAMES", "codec_name", "codec_id", "compress", "decompress", "lz4_fix_kip57_checksum"]

CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_SNAPPY_FRAMED_MAGIC = b"\xff\x06\x00\x00sNaPpY"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
#: Kafka's SnappyOutputStream / KafkaLZ4BlockOutputStream default block size.
_XERIAL_BLOCK = 32 * 1024
_INT32_MAX = (1 << 31) - 1


def codec_name(codec: int) -> str:
    """Name of codec id ``codec`` ("none", "gzip", ...); ``"unknown(N)"`` for ids above 4."""
    return CODEC_NAMES[codec] if 0 <= codec < len(CODEC_NAMES) else f"unknown({codec})"


def codec_id(name: str) -> int:
    """Codec id of ``name``.

    Raises:
        ConfigError: unknown name (a ValueError).
    """
    if type(name) is str and name in CODEC_NAMES:
        return CODEC_NAMES.index(name)
    raise ConfigError(f"unknown compression {name!r}; expected one of {', '.join(CODEC_NAMES)}")


def _cramjam(codec: str) -> Any:
    try:
        import cramjam
    except ImportError:
        raise MissingCodecError(
            f"this Kafka batch is {codec}-compressed and its codec (cramjam) is not installed: "
            "install rmqcore[kafka]"
        ) from None
    mod: ModuleType = cramjam
    return mod


# --- xxHash32, only for the 2-14 byte LZ4 frame descriptor (KIP-57 repair) -------------------------
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & 0xFFFFFFFF


def _xxh32(data: bytes, seed: int = 0) -> int:
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & 0xFFFFFFFF, (seed + _P2) & 0xFFFFFFFF, seed, (seed - _P1) & 0xFFFFFFFF]
        while i + 16 <= n:
            for k in range(4):
                lane = struct.unpack_from("<I", data, i)[0]
                v[k] = (_rotl((v[k] + lane * _P2) & 0xFFFFFFFF, 13) * _P1) & 0xFFFFFFFF
                i += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & 0xFFFFFFFF
    else:
        h = (seed + _P5) & 0xFFFFFFFF
    h = (h + n) & 0xFFFFFFFF
    while i + 4 <= n:
        h = (_rotl((h + struct.unpack_from("<I", data, i)[0] * _P3) & 0xFFFFFFFF, 17) * _P4) & 0xFFFFFFFF
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & 0xFFFFFFFF, 11) * _P1) & 0xFFFFFFFF
        i += 1
    h ^= h >> 15
    h = (h * _P2) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * _P3) & 0xFFFFFFFF
    h ^= h >> 16
    return h


def _lz4_descriptor_end(data: bytes) -> int:
    """Index of the header-checksum byte of an LZ4 frame (after FLG, BD and optional fields)."""
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        return -1
    flg = data[4]
    end = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    return end if end < len(data) else -1


def lz4_fix_kip57_checksum(data: bytes) -> bytes:
    """Return ``data`` with a correct LZ4 frame header checksum (KIP-57: magic-0 writers got it wrong)."""
    hc = _lz4_descriptor_end(data)
    if hc < 0:
        return data
    good = (_xxh32(bytes(data[4:hc])) >> 8) & 0xFF
    if data[hc] == good:
        return data
    fixed = bytearray(data)
    fixed[hc] = good
    return bytes(fixed)


def _snappy_raw(cj: Any, block: bytes) -> bytes:
    """Decompress one raw snappy block after checking its declared length.

    The codec allocates the declared uncompressed length up front, so a corrupt length could ask for
    4 GiB; snappy cannot expand more than ~21x (a 3-byte copy element yields at most 64 bytes).
    """
    declared = 0
    for i in range(5):
        if i >= len(block):
            raise CorruptionError("snappy block ends inside its length header")
        b = block[i]
        declared |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            break
    else:
        raise CorruptionError("snappy block length header is too long")
    if declared > 32 * len(block) + 64 or declared > _INT32_MAX:
        raise CorruptionError(
            f"snappy block declares {declared} uncompressed bytes for {len(block)} compressed bytes"
        )
    return bytes(cj.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes) -> bytes:
    cj = _cramjam("snappy")
    if data[:8] == _XERIAL_MAGIC and len(data) >= 16:
        out = []
        pos = 16
        n = len(data)
        while pos < n:
            if n - pos < 4:
                raise CorruptionError("xerial snappy chunk header runs past the end of the payload")
            (size,) = struct.unpack_from(">i", data, pos)
            pos += 4
            if size < 0 or size > n - pos:
                raise CorruptionError(f"xerial snappy chunk of {size} bytes runs past the end of the payload")
            out.append(_snappy_raw(cj, data[pos : pos + size]))
            pos += size
        return b"".join(out)
    if data[:10] == _SNAPPY_FRAMED_MAGIC:
        return bytes(cj.snappy.decompress(data))
    return _snappy_raw(cj, data)


def decompress(codec: int, data: bytes, magic: int = 2) -> bytes:
    """Decompress a batch payload (v2 records section or a legacy wrapper's value).

    Args:
        codec: codec id (1 gzip, 2 snappy, 3 lz4, 4 zstd).
        data: the compressed bytes.
        magic: the batch's magic (0 enables the KIP-57 lz4 header repair; zstd needs magic 2).

    Raises:
        MissingCodecError: snappy/lz4/zstd without ``cramjam``.
        CorruptionError: unknown codec, zstd in a legacy message, or a payload that does not decompress.
    """
    data = bytes(data)
    name = codec_name(codec)
    if codec == 0:
        return data
    if codec not in (1, 2, 3, 4):
        raise CorruptionError(f"unknown compression codec id {codec}")
    if codec == 4 and magic < 2:
        raise CorruptionError("zstd compression is not allowed in magic v0/v1 messages")
    try:
        if codec == 1:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = d.decompress(data)
            # concatenated gzip members (GZIPInputStream reads them all)
            while d.eof and d.unused_data:
                rest = d.unused_data
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                out += d.decompress(rest)
            if not d.eof:
                raise CorruptionError("gzip stream is truncated")
            return out
        if codec == 2:
            return _snappy_decompress(data)
        if codec == 3:
            cj = _cramjam("lz4")
            if magic == 0:
                data = lz4_fix_kip57_checksum(data)
            return bytes(cj.lz4.decompress(data))
        return bytes(_cramjam("zstd").zstd.decompress(data))
    except (MissingCodecError, CorruptionError):
        raise
    except Exception as e:  # zlib.error, cramjam.DecompressionError, ...: one class for callers
        raise CorruptionError(f"{name} payload does not decompress: {e}") from None


def compress(codec: int, data: bytes) -> bytes:
    """Compress ``data`` the way Kafka's producer does (see the module table).

    Raises:
        MissingCodecError: snappy/lz4/zstd without ``cramjam``.
        ConfigError: unknown codec (a ValueError).
    """
    data = bytes(data)
    if codec == 0:
        return data
    if codec == 1:
        c = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == 2:
        cj = _cramjam("snappy")
        parts = [_XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cj.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
            parts.append(struct.pack(">i", len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec == 3:
        cj = _cramjam("lz4")
        comp = cj.lz4.Compressor(block_linked=False, content_checksum=False)
        comp.compress(data)
        return bytes(comp.finish())
    if codec == 4:
        return bytes(_cramjam("zstd").zstd.compress(data))
    raise ConfigError(f"unknown compression codec id {codec!r}")
