"""Java-compatible hashing (``impl.hashing``), native and pure.

Expected values were computed with JDK 17 ``String.hashCode()``; ``index_key_hash`` mirrors
RocketMQ's ``IndexService``/``IndexFile.indexKeyHashMethod`` (``Math.abs``, MIN_VALUE -> 0).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import twins

FIXTURE_OK = settings(suppress_health_check=[HealthCheck.function_scoped_fixture])

INT_MIN = -(2**31)

JDK_HASHCODES = {
    "": 0,
    "*": 42,
    "TagA": 2598919,
    "TagB": 2598920,
    "TagNeg": -1797390410,
    "SCHEDULE_TOPIC_XXXX": -1995822632,
    "polygenelubricants": INT_MIN,
    "TopicTest#k1": 2746024,
    "TopicTest#k2": 2746025,
    "TopicTest#OrderID188": -1231271670,
    "TopicTest#7F0000010E0A18B4AAC2785B5E470000": 1711423265,
    "主题#键": 634204136,
    "T#😀": 4308978,
}


def _reference(s: str) -> int:
    """hashCode over the UTF-16 code units, independent of both kernels (surrogatepass keeps lone ones)."""
    units = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - 2**32 if h >= 2**31 else h


def test_reference_agrees_with_jdk_vectors() -> None:
    for s, h in JDK_HASHCODES.items():
        assert _reference(s) == h, s


def test_java_string_hash_vectors(impl) -> None:
    for s, h in JDK_HASHCODES.items():
        assert impl.hashing.java_string_hash(s) == h, s
    assert impl.hashing.java_string_hash("Aa") == impl.hashing.java_string_hash("BB") == 2112


def test_index_key_hash_vectors(impl) -> None:
    ikh = impl.hashing.index_key_hash
    assert ikh("polygenelubricants") == 0  # abs(Integer.MIN_VALUE) is negative in Java -> 0, not a mask
    assert ikh("TopicTest#k1") == 2746024
    assert ikh("TopicTest#k2") == 2746025
    assert ikh("TopicTest#OrderID188") == 1231271670
    assert ikh("TopicTest#7F0000010E0A18B4AAC2785B5E470000") == 1711423265
    assert ikh("SCHEDULE_TOPIC_XXXX") == 1995822632
    assert ikh("TagNeg") == 1797390410
    assert ikh("主题#键") == 634204136
    assert ikh("T#😀") == 4308978
    assert ikh("") == 0


def test_tags_code(impl) -> None:
    tc = impl.hashing.tags_code
    assert tc(None) == 0
    assert tc("") == 0
    assert tc("TagA") == 2598919
    assert tc("TagB") == 2598920
    assert tc("*") == 42
    assert tc("TagNeg") == -1797390410  # sign-extended, as stored in the ConsumeQueue's 8-byte field
    assert tc("polygenelubricants") == INT_MIN


def test_index_slot(impl) -> None:
    slot = impl.hashing.index_slot
    assert slot(1231271670, 5_000_000) == 1271670
    assert slot(impl.hashing.index_key_hash("TopicTest#OrderID188"), 5_000_000) == 1271670
    assert slot(2746024, 5_000_000) == 2746024
    assert slot(0, 1) == 0
    assert slot(2**31 - 1, 5_000_000) == (2**31 - 1) % 5_000_000
    assert slot(-7, 5) == 3  # Python semantics
    assert slot(2**70 + 3, 2**65) == 3
    assert slot(2**70 + 3, 10) == (2**70 + 3) % 10
    assert slot(True, 2) == 1
    for bad in (0, -1, -(2**70)):
        with pytest.raises(ValueError):
            slot(5, bad)
    for a, b in ((1.0, 5), (5, 2.0), ("1", 5), (None, 5), (5, None)):
        with pytest.raises(TypeError):
            slot(a, b)


def test_type_errors(impl) -> None:
    h = impl.hashing
    for bad in (None, b"TagA", 42, 1.5, ["TagA"], bytearray(b"x")):
        with pytest.raises(TypeError):
            h.java_string_hash(bad)
        with pytest.raises(TypeError):
            h.index_key_hash(bad)
        if bad is not None:
            with pytest.raises(TypeError):
                h.tags_code(bad)


def test_str_subclass(impl) -> None:
    class Key(str):
        pass

    assert impl.hashing.java_string_hash(Key("TagA")) == 2598919
    assert impl.hashing.index_key_hash(Key("polygenelubricants")) == 0
    assert impl.hashing.tags_code(Key("*")) == 42


@pytest.mark.parametrize(
    "alphabet", ["aZ9#", "é\xff\x80", "主题键\u0100\uffff", "😀\U0010ffff\U00010000", "\ud800\udfffx"]
)
def test_every_length_of_each_storage_kind(impl, alphabet) -> None:
    """Latin-1 / UCS-2 / UCS-4 storage, lone surrogates, and every remainder of the 4-unit unroll."""
    for n in range(0, 40):
        s = "".join(alphabet[(i * 7 + n) % len(alphabet)] for i in range(n))
        assert impl.hashing.java_string_hash(s) == _reference(s), repr(s)
        assert impl.hashing.java_string_hash("\u0100" + s) == _reference("\u0100" + s)
        assert impl.hashing.java_string_hash("😀" + s) == _reference("😀" + s)


def test_surrogates_count_as_utf16_units(impl) -> None:
    jh = impl.hashing.java_string_hash
    # an astral character hashes like its surrogate pair; a lone surrogate is one unit
    assert jh("😀") == 31 * 0xD83D + 0xDE00
    assert jh("😀") == jh("\ud83d\ude00")
    assert jh("\ud800") == 0xD800
    assert jh("\udc00x") == 31 * 0xDC00 + ord("x")
    assert jh("\U0010ffff") == _reference("\U0010ffff") == 31 * 0xDBFF + 0xDFFF


_any_code_points = st.lists(st.integers(0, 0x10FFFF), max_size=60).map(lambda cps: "".join(map(chr, cps)))
_texts = st.one_of(
    st.text(max_size=200), _any_code_points, st.text(alphabet="AaBb#_-0123456789", max_size=80)
)


@FIXTURE_OK
@given(s=_texts)
def test_property_matches_reference(impl, s) -> None:
    h = _reference(s)
    assert impl.hashing.java_string_hash(s) == h
    assert impl.hashing.index_key_hash(s) == (0 if h == INT_MIN else abs(h))
    assert impl.hashing.tags_code(s) == h
    assert 0 <= impl.hashing.index_key_hash(s) <= 2**31 - 1


@FIXTURE_OK
@given(s=_texts, slots=st.integers(1, 2**40))
def test_property_native_equals_pure(s, slots) -> None:
    impls = twins()
    results = {
        (
            ns.hashing.java_string_hash(s),
            ns.hashing.index_key_hash(s),
            ns.hashing.tags_code(s or None),
            ns.hashing.index_slot(ns.hashing.index_key_hash(s), slots),
        )
        for ns in impls
    }
    assert len(results) == 1
    h = _reference(s)
    key_hash = 0 if h == INT_MIN else abs(h)
    assert results.pop() == (h, key_hash, h, key_hash % slots)


def test_twins_have_the_same_public_api() -> None:
    impls = twins()
    for ns in impls:
        assert ns.hashing.__all__ == ["index_key_hash", "index_slot", "java_string_hash", "tags_code"]
        assert all(callable(getattr(ns.hashing, n)) for n in ns.hashing.__all__)
