"""Java-compatible string hashing, pure-Python twin of :mod:`rmqcore._native.hashing`.

RocketMQ keys its IndexFile by ``String.hashCode()`` and stores ``tagsCode`` (the tags' hashCode) in
the ConsumeQueue. Java hashes UTF-16 code units: ``h = 31 * h + unit`` with int32 wrap-around; a
character above U+FFFF is two units (its surrogate pair) and a lone surrogate in a Python str is one.
"""

from __future__ import annotations

from operator import index as _index

__all__ = ["index_key_hash", "index_slot", "java_string_hash", "tags_code"]

_INT_MIN = -0x80000000


def _hash(s: str) -> int:
    h = 0
    for ch in s:
        c = ord(ch)
        if c > 0xFFFF:
            c -= 0x10000
            h = (h * 31 + 0xD800 + (c >> 10)) & 0xFFFFFFFF
            h = (h * 31 + 0xDC00 + (c & 0x3FF)) & 0xFFFFFFFF
        else:
            h = (h * 31 + c) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode()`` of ``s`` as a signed int32."""
    if not isinstance(s, str):
        raise TypeError(f"expected str, got {type(s).__name__}")
    return _hash(s)


def index_key_hash(key: str) -> int:
    """RocketMQ IndexService key hash: ``abs(hashCode)``, with Integer.MIN_VALUE mapped to 0."""
    if not isinstance(key, str):
        raise TypeError(f"expected str, got {type(key).__name__}")
    h = _hash(key)
    return 0 if h == _INT_MIN else abs(h)


def tags_code(tags: str | None) -> int:
    """ConsumeQueue tags code: 0 for no tags (None or ""), else the tags' signed hashCode."""
    if tags is None:
        return 0
    if not isinstance(tags, str):
        raise TypeError(f"expected str or None, got {type(tags).__name__}")
    return _hash(tags)


def index_slot(key_hash: int, slot_count: int) -> int:
    """Hash slot of a key hash in an IndexFile with ``slot_count`` slots (``key_hash % slot_count``)."""
    key_hash = _index(key_hash)
    slot_count = _index(slot_count)
    if slot_count <= 0:
        raise ValueError(f"slot_count must be positive, not {slot_count}")
    return key_hash % slot_count
