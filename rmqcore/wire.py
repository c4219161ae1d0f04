"""How RocketMQ spells a message's text fields: the properties string, store hosts and message ids, and the
delay topic whose consume-queue tags code is a delivery time.

A leaf module (it imports only ``layout`` and ``errors``): the kernels of both twins use it, and
``rmqcore.message`` re-exports it, so no kernel has to import ``message``.

Properties (MessageDecoder.messageProperties2String / string2messageProperties): ``name\\x01value``
pairs separated by ``\\x02``. 4.x writes no trailing separator, 5.x ends every pair with one.
Parsing keeps a segment only when both name and value are non-empty; later duplicates win.

Offset message id (MessageDecoder.createMessageId): store host address (4|16 bytes) + port (int)
+ physical offset (long), upper-case hex: 32 chars (IPv4) or 56 (IPv6).

Delay topic (TopicValidator.RMQ_SYS_SCHEDULE_TOPIC): a message put there with a DELAY level > 0 gets its
delivery time as tags code (CommitLog.checkMessageAndReturnSize). The C dispatch kernel spells the topic
as ``RMQ_SCHEDULE_TOPIC`` in csrc/rmq_dispatch.h; ``rmqcore._native.dispatch`` checks at import that
the two agree.
"""
from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from . import layout as L
from .errors import InvalidMessageError

__all__ = [
    "store_timestamp_at",
    "SCHEDULE_TOPIC",
    "DEFAULT_DELAY_LEVELS_MS",
    "dispatch_tags_code",
    "parse_properties",
    "properties_to_string",
    "Host",
    "format_address",
    "format_host",
    "create_message_id",
    "decode_message_id",
    "utf8_text",
]

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # TopicValidator.RMQ_SYS_SCHEDULE_TOPIC
# MessageStoreConfig.messageDelayLevel: "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DEFAULT_DELAY_LEVELS_MS = (
    1_000, 5_000, 10_000, 30_000, 60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000,
    480_000, 540_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000,
)


def dispatch_tags_code(
    topic: str, properties: Mapping[str, str], store_timestamp: int, hash_tags: Callable[[str], int],
    delay_levels_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS,
) -> int:
    """tagsCode as CommitLog.checkMessageAndReturnSize computes it for dispatch.

    The hash of the whole TAGS string (sign-extended; ``hash_tags`` is a hashing twin's ``tags_code``), 0
    without tags; for ``SCHEDULE_TOPIC_XXXX`` with a DELAY level > 0 the delivery time instead (store time
    + the level's delay, capped at the highest level; a level that is not an int counts as 0).
    """
    if topic == SCHEDULE_TOPIC:
        d = properties.get(L.PROPERTY_DELAY)
        if d is not None:
            try:
                level = int(d)
            except ValueError:
                level = 0
            if level > 0:
                level = min(level, len(delay_levels_ms))
                return store_timestamp + delay_levels_ms[level - 1]
    tags = properties.get(L.PROPERTY_TAGS)
    return hash_tags(tags) if tags else 0


def utf8_text(s: str, what: str, error: type[InvalidMessageError] = InvalidMessageError) -> bytes:
    """``s`` as UTF-8; ``error`` naming ``what`` when it holds a lone surrogate (how Python hands
    back bytes that are no UTF-8). No Java reader decodes such bytes to the same string, so a tag,
    key, topic or group stored with one would never be found again: refused, never passed through."""
    try:
        return s.encode("utf-8")
    except UnicodeEncodeError:
        raise error(f"{what} {s[:40]!r} is no UTF-8 text (it holds a lone surrogate)") from None


def parse_properties(s: str) -> dict[str, str]:
    """string2messageProperties: the map a RocketMQ reader sees (empty names/values dropped)."""
    out: dict[str, str] = {}
    if not s:
        return out
    for seg in s.split(L.PROPERTY_SEPARATOR):
        i = seg.find(L.NAME_VALUE_SEPARATOR)
        if i > 0 and i < len(seg) - 1:
            out[seg[:i]] = seg[i + 1 :]
    return out


def properties_to_string(props: Mapping[str, str] | Iterable[tuple[str, str]], flavour: int = 4) -> str:
    """messageProperties2String in ``flavour`` 4 (no trailing separator) or 5 (trailing separator).

    Pairs are written in the given order; names may not contain ``\\x01``/``\\x02`` and neither
    may values (they would change the parse); None values are skipped, as Java skips them.

    Raises:
        InvalidMessageError: a name or value that is not str, an empty name, or one with a separator.
    """
    items = props.items() if isinstance(props, Mapping) else props
    parts = []
    for name, value in items:
        if value is None:
            continue
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidMessageError("property names and values must be str")
        if not name:
            raise InvalidMessageError("property names must be non-empty")
        for t in (name, value):
            if L.NAME_VALUE_SEPARATOR in t or L.PROPERTY_SEPARATOR in t:
                raise InvalidMessageError(f"property {name!r} contains a \\x01 or \\x02 separator")
        parts.append(name + L.NAME_VALUE_SEPARATOR + value)
    if not parts:
        return ""
    s = L.PROPERTY_SEPARATOR.join(parts)
    return s + L.PROPERTY_SEPARATOR if flavour >= 5 else s


class Host(NamedTuple):
    """A socket address as stored: raw address bytes (4 or 16) and port."""

    address: bytes
    port: int

    def __str__(self) -> str:
        return format_host(self.address, self.port)


def format_address(address: bytes) -> str:
    """The address as Java's InetAddress.getHostAddress prints it (IPv6 uncompressed, no zero padding)."""
    if len(address) == 4:
        return ".".join(str(b) for b in address)
    if len(address) == 16:
        return ":".join(f"{w:x}" for w in struct.unpack(">8H", address))
    return address.hex()


def format_host(address: bytes, port: int, sep: str = ":") -> str:
    return f"{format_address(address)}{sep}{port}"


_MSGID_V4 = struct.Struct(">4siq")
_MSGID_V6 = struct.Struct(">16siq")


def create_message_id(address: bytes, port: int, offset: int) -> str:
    """MessageDecoder.createMessageId: upper-case hex of address + port + physical offset."""
    st = _MSGID_V4 if len(address) == 4 else _MSGID_V6
    return st.pack(address, port, offset).hex().upper()


def decode_message_id(msg_id: str) -> tuple[Host, int]:
    """MessageDecoder.decodeMessageId: ``(store host, physical offset)``; 32 hex chars = IPv4.

    Raises:
        InvalidMessageError: not hex, or neither 32 nor 56 hex digits.
    """
    try:
        raw = bytes.fromhex(msg_id)
    except (TypeError, ValueError):
        raise InvalidMessageError(f"message id {msg_id!r} is not hex") from None
    if len(raw) == 16:
        a, p, o = _MSGID_V4.unpack(raw)
    elif len(raw) == 28:
        a, p, o = _MSGID_V6.unpack(raw)
    else:
        raise InvalidMessageError(f"message id {msg_id!r} must have 32 or 56 hex digits")
    return Host(a, p), o


_SYSFLAG = struct.Struct(">I")
_STORETIMESTAMP = struct.Struct(">q")
_AT_SYSFLAG, _AT_TS_V4, _AT_TS_V6 = L.POS_SYSFLAG, L.POS_STORETIMESTAMP, L.POS_STORETIMESTAMP_V6


def store_timestamp_at(buf: mmap.mmap | bytes | bytearray | memoryview, pos: int, end: int) -> int | None:
    """STORETIMESTAMP of the record starting at ``pos`` of ``buf`` (CommitLog.pickupStoreTimestamp: it
    follows a born host of 8 or 20 bytes, as SYSFLAG says); None when the data, which ends at ``end``,
    may stop before it."""
    if pos < 0 or pos + _AT_TS_V6 + 8 > end:
        return None
    v6 = _SYSFLAG.unpack_from(buf, pos + _AT_SYSFLAG)[0] & L.FLAG_BORNHOST_V6
    at = pos + (_AT_TS_V6 if v6 else _AT_TS_V4)
    return _STORETIMESTAMP.unpack_from(buf, at)[0]  # type: ignore[no-any-return]
