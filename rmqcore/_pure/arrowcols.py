"""Arrow column builders over decoded CommitLog records (reference twin of ``rmqcore._native.arrowcols``).

Every function takes ``data`` (any byte buffer: bytes, mmap, uint8 array) and record columns as
produced by ``codec.decode_batch`` (integer sequences of equal length), and returns numpy arrays laid
out as Arrow wants them: int32 offsets (the first 0) and uint8 values. Strings are UTF-8 as
``bytes.decode("utf-8", "replace")`` makes them (one U+FFFD per maximal invalid subpart).

Outputs are allocated by ``empty(n, dtype)`` when given (e.g. from Arrow's memory pool), else by
``numpy.empty``; they must be writable contiguous arrays of that shape and dtype.

Raises ValueError when a range lies outside ``data``, the columns differ in length, or an output
would not fit int32 offsets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import layout as L
from ..wire import create_message_id, format_host, parse_properties

__all__ = ["gather", "gather_utf8", "format_hosts", "message_ids", "split_properties"]

_I32_MAX = 2**31 - 1


def _col(a: Any, n: int, name: str) -> list[int]:
    c = np.ascontiguousarray(a, dtype=np.int64)
    if c.ndim != 1 or c.shape[0] != n:
        raise ValueError(f"{name} must be a 1-D integer column of {n} values")
    return c.tolist()  # type: ignore[no-any-return]


def _view(data: Any) -> memoryview:
    """A byte view (not a copy: ``data`` may be a whole mapped file); use it in a ``with``."""
    m = memoryview(data)
    return m if m.format == "B" and m.ndim == 1 else m.cast("B")


def _check_ranges(pos: list[int], ln: list[int], size: int) -> None:
    for i, (p, n) in enumerate(zip(pos, ln, strict=True)):
        if p < 0 or n < 0 or p + n > size:
            raise ValueError(f"range {i} [{p}, +{n}) lies outside data of {size} bytes")


def _fits(total: int, what: str) -> None:
    if total > _I32_MAX:
        raise ValueError(f"{what}: {total} bytes do not fit Arrow int32 offsets")


def _new(empty: Any, n: int, dtype: Any) -> np.ndarray:
    """An output array: ``empty(n, dtype)`` (the caller's allocator) or numpy's."""
    if empty is None:
        return np.empty(n, dtype=dtype)
    a = empty(n, dtype)
    if a.dtype != dtype or a.shape != (n,):
        raise ValueError(f"empty({n}, {dtype}) returned {a.dtype} {a.shape}")
    return a  # type: ignore[no-any-return]


def _ints(values: Sequence[int], dtype: Any, empty: Any) -> np.ndarray:
    a = _new(empty, len(values), dtype)
    a[:] = values
    return a


def _pack(items: Sequence[bytes], empty: Any = None) -> tuple[np.ndarray, np.ndarray]:
    lens = np.zeros(len(items) + 1, dtype=np.int64)
    if items:
        np.cumsum([len(b) for b in items], out=lens[1:])
    _fits(int(lens[-1]), "values")
    offsets = _new(empty, len(items) + 1, np.int32)
    offsets[:] = lens
    values = _new(empty, int(lens[-1]), np.uint8)
    values[:] = np.frombuffer(b"".join(items), dtype=np.uint8)
    return offsets, values


def _utf8(b: bytes) -> bytes:
    return b.decode("utf-8", "replace").encode("utf-8")


def gather(data: Any, pos: Any, length: Any, empty: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, values)``: the slices ``data[pos[i]:pos[i] + length[i]]`` concatenated (raw bytes)."""
    n = len(pos)
    p, ln = _col(pos, n, "pos"), _col(length, n, "length")
    with _view(data) as d:
        _check_ranges(p, ln, len(d))
        return _pack([bytes(d[a : a + k]) for a, k in zip(p, ln, strict=True)], empty)


def gather_utf8(data: Any, pos: Any, length: Any, empty: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """As ``gather``, each slice decoded as ``bytes.decode("utf-8", "replace")`` and re-encoded."""
    n = len(pos)
    p, ln = _col(pos, n, "pos"), _col(length, n, "length")
    with _view(data) as d:
        _check_ranges(p, ln, len(d))
        return _pack([_utf8(bytes(d[a : a + k])) for a, k in zip(p, ln, strict=True)], empty)


def _addresses(data: Any, pos: list[int], flags: list[int], v6_bit: int) -> list[bytes]:
    out = []
    with _view(data) as d:
        for i, (p, f) in enumerate(zip(pos, flags, strict=True)):
            w = 16 if f & v6_bit else 4
            if p < 0 or p + w > len(d):
                raise ValueError(f"host address {i} at {p} lies outside data of {len(d)} bytes")
            out.append(bytes(d[p : p + w]))
    return out


def format_hosts(
    data: Any, pos: Any, port: Any, sys_flag: Any, v6_bit: int, empty: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, values)`` of ``wire.format_host(address, port[i])``, the address being the 16
    bytes at ``pos[i]`` when ``sys_flag[i] & v6_bit``, else the 4 bytes there."""
    n = len(pos)
    p, pt, fl = _col(pos, n, "pos"), _col(port, n, "port"), _col(sys_flag, n, "sys_flag")
    addrs = _addresses(data, p, fl, int(v6_bit))
    return _pack([format_host(a, q).encode() for a, q in zip(addrs, pt, strict=True)], empty)


def message_ids(
    data: Any, pos: Any, port: Any, sys_flag: Any, v6_bit: int, offset: Any, empty: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets, values)`` of ``message.create_message_id(address, port[i], offset[i])`` (address
    as in ``format_hosts``)."""
    n = len(pos)
    p, pt, fl = _col(pos, n, "pos"), _col(port, n, "port"), _col(sys_flag, n, "sys_flag")
    of = _col(offset, n, "offset")
    addrs = _addresses(data, p, fl, int(v6_bit))
    for i, q in enumerate(pt):
        if not -(2**31) <= q < 2**31:
            raise ValueError(f"port {q} of row {i} is not an int32")
    return _pack([create_message_id(a, q, o).encode() for a, q, o in zip(addrs, pt, of, strict=True)], empty)


def split_properties(data: Any, pos: Any, length: Any, empty: Any = None) -> tuple[np.ndarray, ...]:
    """The properties strings ``data[pos[i]:pos[i] + length[i]]`` as Arrow columns.

    Returns ``(map_offsets, key_offsets, key_data, value_offsets, value_data, tag_offsets, tag_data,
    tag_valid, keys_offsets, token_offsets, token_data)``: the map<string,string> of each record
    (``message.parse_properties`` of the string decoded with U+FFFD replacement, in the dict's
    order), its TAGS value (``tag_valid`` uint8 0 where it has none) and its KEYS value split on
    single spaces with empty tokens dropped (list offsets into the tokens).
    """
    n = len(pos)
    p, ln = _col(pos, n, "pos"), _col(length, n, "length")
    with _view(data) as d:
        _check_ranges(p, ln, len(d))
        raw = [bytes(d[a : a + k]) for a, k in zip(p, ln, strict=True)]
    map_off, keys_off = [0], [0]
    names: list[bytes] = []
    values: list[bytes] = []
    tags: list[bytes] = []
    valid: list[int] = []
    tokens: list[bytes] = []
    for r in raw:
        m = parse_properties(r.decode("utf-8", "replace"))
        for name, value in m.items():
            names.append(name.encode())
            values.append(value.encode())
        map_off.append(len(names))
        t = m.get(L.PROPERTY_TAGS)
        valid.append(t is not None)
        tags.append(b"" if t is None else t.encode())
        tokens.extend(x.encode() for x in m.get(L.PROPERTY_KEYS, "").split(L.KEY_SEPARATOR) if x)
        keys_off.append(len(tokens))
    ko, kd = _pack(names, empty)
    vo, vd = _pack(values, empty)
    to, td = _pack(tags, empty)
    so, sd = _pack(tokens, empty)
    return (
        _ints(map_off, np.int32, empty), ko, kd, vo, vd, to, td, _ints(valid, np.uint8, empty),
        _ints(keys_off, np.int32, empty), so, sd,
    )
