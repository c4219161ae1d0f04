"""The one place where a ``kafka_batch`` walk status becomes an exception (with path and file offset)."""

from __future__ import annotations

import struct
import zlib
from typing import Any, NoReturn

from rmqcore.errors import BadMagicError, ChecksumError, CorruptionError, RecordSizeError
from rmqcore.kafka_layout import LEGACY_V1_MIN_SIZE, LOG_OVERHEAD, MIN_ENTRY_SIZE, RECORD_BATCH_OVERHEAD

from ._kernels import Kernels

__all__ = ["raise_for_status"]


def raise_for_status(status: int, buf: Any, position: int, path: str | None, k: Kernels) -> NoReturn:
    """Raise the exception for negative walk ``status`` found at ``position`` of ``buf``.

    Raises:
        RecordSizeError: size field below 14 (Kafka ``CorruptRecordException``) or an entry shorter than
            its format's overhead.
        BadMagicError: magic not 0, 1 or 2.
        ChecksumError: CRC mismatch (``expected`` = stored, ``actual`` = computed).
        CorruptionError: any other negative status.
    """
    name = path.rsplit("/", 1)[-1] if path else "buffer"
    b = k.batch
    if status == b.E_SIZE:
        size = struct.unpack_from(">i", buf, position + 8)[0]
        raise RecordSizeError(
            f"Found record size {size} smaller than minimum record overhead ({MIN_ENTRY_SIZE}) "
            f"in file {name}.",
            position,
            path,
        )
    if status == b.E_MAGIC:
        raise BadMagicError(
            f"Invalid magic {struct.unpack_from('>b', buf, position + 16)[0]} in file {name}.", position, path
        )
    if status == b.E_SHORT:
        size = struct.unpack_from(">i", buf, position + 8)[0] + LOG_OVERHEAD
        magic = buf[position + 16]
        need = RECORD_BATCH_OVERHEAD if magic == 2 else LOG_OVERHEAD + LEGACY_V1_MIN_SIZE
        raise RecordSizeError(
            f"Record batch is corrupt (the size {size} is smaller than the minimum allowed overhead {need}) "
            f"in file {name}.",
            position,
            path,
        )
    if status == b.E_CRC:
        size = struct.unpack_from(">i", buf, position + 8)[0] + 12
        magic = buf[position + 16]
        if magic == 2:
            stored = struct.unpack_from(">I", buf, position + 17)[0]
            computed = int(k.crc.crc32c(bytes(buf[position + 21 : position + size])))
        else:
            stored = struct.unpack_from(">I", buf, position + 12)[0]
            computed = zlib.crc32(bytes(buf[position + 16 : position + size]))
        err = ChecksumError(
            f"Record is corrupt (stored crc = {stored}, computed crc = {computed}) in file {name}.",
            position,
            path,
        )
        err.expected = stored  # type: ignore[attr-defined]
        err.actual = computed  # type: ignore[attr-defined]
        raise err
    raise CorruptionError(f"unexpected walk status {status} in file {name}", position, path)
