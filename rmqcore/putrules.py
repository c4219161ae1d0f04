"""What a put's arguments become in a record: the topic's bytes, the properties string, the hosts.

RocketMQ checks a message before its CommitLog encodes it (``TopicValidator``, the properties
length check of ``putMessage``, ``MessageDecoder.messageProperties2String``); ``PutRules`` is that
step for one CommitLog flavour. The appender kernels take a ``PutRules`` and call it for whatever
they do not encode themselves (a topic not seen yet, a properties mapping, non-ASCII tags, hosts
given as text), so both twins apply the one rule written here.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import layout as L
from .errors import InvalidMessageError, PropertiesTooLargeError
from .message import parse_host, properties_to_string, validate_topic
from .wire import utf8_text

__all__ = ["PutRules", "keys_value", "per_message"]


def keys_value(keys: Any) -> str:
    """The KEYS property of ``keys``: a str as it is, a sequence of str joined by spaces (as
    RocketMQ's ``Message.setKeys(Collection)``); anything else is an InvalidMessageError."""
    if isinstance(keys, str):
        return keys
    if isinstance(keys, (bytes, bytearray, memoryview)) or not isinstance(keys, (Sequence, set, frozenset)):
        raise InvalidMessageError(f"keys must be a str or a sequence of str, not {type(keys).__name__}")
    if not all(isinstance(k, str) for k in keys):
        raise InvalidMessageError("keys must be a str or a sequence of str")
    return L.KEY_SEPARATOR.join(keys)


def per_message(name: str, value: Any, n: int, one_allowed: bool) -> Any:
    """Check a put_batch argument that gives one value per body (``tags`` may also be one str
    for every body): None, that str, or a sequence of ``n`` items (their types are checked with
    each message's properties)."""
    if value is None or (one_allowed and isinstance(value, str)):
        return value
    if isinstance(value, (str, bytes, bytearray, memoryview)) or not isinstance(value, Sequence):
        one = " (or one str for every body)" if one_allowed else ""
        raise InvalidMessageError(f"{name} needs one entry per body{one}, not {type(value).__name__}")
    if len(value) != n:
        raise InvalidMessageError(f"{name} has {len(value)} entries for {n} bodies")
    return value


class PutRules:
    """The argument rules of one CommitLog flavour (4: topics up to 127 characters; 5: properties
    strings built from tags and keys end with ``\\x02``)."""

    __slots__ = ("flavour", "max_topic_len")

    def __init__(self, flavour: int) -> None:
        self.flavour = flavour
        self.max_topic_len = L.MAX_TOPIC_LEN_V1 if flavour == 4 else L.MAX_TOPIC_LEN

    def topic_bytes(self, topic: str) -> bytes:
        """The stored bytes of a valid topic (the appender caches the answer per distinct topic)."""
        return validate_topic(topic, self.max_topic_len)

    def host(self, value: Any) -> tuple[bytes, int]:
        """``(address bytes, port)`` of a host as ``put`` takes it (``"ip:port"``, a tuple, a Host)."""
        h = parse_host(value)
        return h.address, h.port

    def properties_bytes(
        self, tags: str | None, keys: str | Sequence[str] | None, properties: Mapping[str, str] | None,
        properties_raw: str | None,
    ) -> bytes:
        """The stored properties of one message (``tags``/``keys`` win over their entries in
        ``properties``; ``properties_raw`` is stored as it is and excludes the other three)."""
        if properties is not None and not isinstance(properties, Mapping):
            raise InvalidMessageError(
                f"properties must be a mapping of str to str, not {type(properties).__name__}")
        if properties_raw is not None:
            if tags is not None or keys is not None or properties:
                raise InvalidMessageError("properties_raw excludes tags, keys and properties")
            if not isinstance(properties_raw, str):
                raise InvalidMessageError("properties_raw must be str")
            s = properties_raw
        else:
            items: list[tuple[str, str]] = []
            if properties:
                items.extend((k, v) for k, v in properties.items() if k not in (L.PROPERTY_TAGS, L.PROPERTY_KEYS))
            if keys is not None:
                items.append((L.PROPERTY_KEYS, keys_value(keys)))
            elif properties and L.PROPERTY_KEYS in properties:
                items.append((L.PROPERTY_KEYS, properties[L.PROPERTY_KEYS]))
            if tags is not None:
                items.append((L.PROPERTY_TAGS, tags))
            elif properties and L.PROPERTY_TAGS in properties:
                items.append((L.PROPERTY_TAGS, properties[L.PROPERTY_TAGS]))
            s = properties_to_string(items, self.flavour)
        b = utf8_text(s, "the properties (tags, keys)")
        if len(b) > L.MAX_PROPERTIES_LEN:
            raise PropertiesTooLargeError(
                f"properties of {len(b)} UTF-8 bytes exceed {L.MAX_PROPERTIES_LEN} (PROPERTIES_SIZE_EXCEEDED)"
            )
        return b

    def tags_keys_bytes(self, tags: str | None, keys: str | Sequence[str] | None) -> bytes:
        """The properties of a message with only ``tags`` and ``keys`` (the kernels'
        ``batch_properties`` ask for those they do not encode themselves)."""
        return self.properties_bytes(tags, keys, None, None)

    def batch_properties(self, n: int, tags: Any, keys: Any, properties: Any, properties_raw: Any,
                         encode: Callable[..., list[Any]]) -> list[Any]:
        """The properties of each of a batch's ``n`` messages (``put_batch``'s arguments; ``encode``:
        the appender kernel's ``batch_properties``, which builds the tags-and-keys-only case)."""
        if properties_raw is not None and (isinstance(properties_raw, (str, bytes, bytearray, memoryview))
                                           or not isinstance(properties_raw, Sequence)):
            raise InvalidMessageError(f"properties_raw needs one entry per body, not {type(properties_raw).__name__}")
        if (properties is not None and not isinstance(properties, (Mapping, Sequence))) or isinstance(
                properties, (str, bytes, bytearray, memoryview)):
            raise InvalidMessageError(
                f"properties must be a mapping, or one mapping per body, not {type(properties).__name__}")
        if properties_raw is not None:
            if properties is not None or tags is not None or keys is not None or len(properties_raw) != n:
                raise InvalidMessageError(
                    "properties_raw needs one string per body and excludes tags, keys and properties")
            # the strings go to the kernel as they are: it takes an ASCII str's bytes without a copy,
            # encodes any other str as UTF-8, refuses anything else and checks every length
            return properties_raw if type(properties_raw) is list else list(properties_raw)
        if tags is None and keys is None and (properties is None or isinstance(properties, Mapping)):
            return [self.properties_bytes(None, None, properties, None)] * n
        tags = per_message("tags", tags, n, True)
        keys = per_message("keys", keys, n, False)
        if properties is None:  # the kernel builds "KEYS\x01k\x02TAGS\x01t\x02" itself, else asks us
            return encode(n, tags, keys, self.flavour, self.tags_keys_bytes)
        if not isinstance(properties, Mapping) and len(properties) != n:
            raise InvalidMessageError("properties needs one mapping per body")
        return [
            self.properties_bytes(
                tags if tags is None or isinstance(tags, str) else tags[i],
                None if keys is None else keys[i],
                properties if isinstance(properties, Mapping) else properties[i], None)
            for i in range(n)
        ]
