"""Messages as RocketMQ shapes them: topics, hosts, message ids, properties, tags codes, decoded records.

The text formats themselves (properties string, message ids, the delay topic) live in the leaf module
:mod:`rmqcore.wire`, which the kernels use; this module re-exports them beside what needs a kernel twin:
``compute_tags_code`` (the chosen hashing twin) and ``MessageExt`` (the chosen codec twin's class).
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _impl
from . import layout as L
from .errors import InvalidMessageError, InvalidTopicError
from .wire import (
    DEFAULT_DELAY_LEVELS_MS,
    SCHEDULE_TOPIC,
    Host,
    create_message_id,
    decode_message_id,
    dispatch_tags_code,
    format_address,
    format_host,
    parse_properties,
    properties_to_string,
)

__all__ = [
    "parse_properties",
    "properties_to_string",
    "Host",
    "parse_host",
    "format_address",
    "format_host",
    "create_message_id",
    "decode_message_id",
    "MessageExt",
    "validate_topic",
    "SCHEDULE_TOPIC",
    "DEFAULT_DELAY_LEVELS_MS",
    "compute_tags_code",
]

_TOPIC_RE = re.compile(r"^[%|a-zA-Z0-9_-]+$")


def validate_topic(topic: str, max_len: int = L.MAX_TOPIC_LEN) -> bytes:
    """TopicValidator: non-empty, characters in ``[%|a-zA-Z0-9_-]``, at most ``max_len`` chars."""
    if not isinstance(topic, str):
        raise InvalidTopicError(f"topic must be str, not {type(topic).__name__}")
    if not topic:
        raise InvalidTopicError("topic is empty")
    if len(topic) > max_len:
        raise InvalidTopicError(f"topic of {len(topic)} chars is longer than {max_len}")
    if not _TOPIC_RE.match(topic):
        raise InvalidTopicError(f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]")
    return topic.encode("ascii")


def parse_host(value: Any) -> Host:
    """Accept ``"ip:port"``, ``"[v6]:port"``, ``"ip|port"`` (the goldens' form), ``(ip, port)`` or a Host."""
    if isinstance(value, Host):
        return value
    try:
        if isinstance(value, tuple) and len(value) == 2:
            ip, port = value
            addr = ipaddress.ip_address(ip)
            port = int(port)
        elif isinstance(value, str):
            if "|" in value:
                ip, _, p = value.rpartition("|")
            elif value.startswith("["):
                ip, _, p = value[1:].partition("]:")
            else:
                ip, _, p = value.rpartition(":")
            addr = ipaddress.ip_address(ip)
            port = int(p)
        else:
            raise TypeError
    except (TypeError, ValueError):
        raise InvalidMessageError(f"not a host address: {value!r} (use 'ip:port')") from None
    if not 0 <= port <= 0x7FFFFFFF:
        raise InvalidMessageError(f"port {port} out of range")
    return Host(addr.packed, port)


def compute_tags_code(
    topic: str, properties: Mapping[str, str], store_timestamp: int,
    delay_levels_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS,
) -> int:
    """tagsCode as CommitLog.checkMessageAndReturnSize computes it for dispatch: the TAGS hash, or the
    delivery time for the delay topic (:func:`rmqcore.wire.dispatch_tags_code` with the chosen hashing
    twin)."""
    return dispatch_tags_code(topic, properties, store_timestamp, _impl.hashing.tags_code, delay_levels_ms)


# MessageExt, a decoded CommitLog record, is the chosen codec twin's class: ``_native.codec``'s
# has C fields and is built without running Python code, ``_pure.codec``'s has the same
# constructor, attributes, properties and values.
if TYPE_CHECKING:
    from ._pure.codec import MessageExt as MessageExt
else:
    MessageExt = _impl.codec.MessageExt
