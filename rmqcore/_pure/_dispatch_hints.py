"""The dispatch hints' reader, pure twin of ``rmq_dispatch_hinted`` (csrc/rmq_dispatch.c): the
records a writer's hint ring describes, checked against their headers, as the rows ``dispatch_batch``
fills (the ring's layout: csrc/rmq_hints.h). ``Dispatcher.run`` of the pure twin calls it."""
from __future__ import annotations

from typing import Any

from ..layout import (
    C_POSITION, C_QUEUE_ID, C_QUEUE_OFFSET, C_SIZE, C_STORE_TIMESTAMP, C_SYS_FLAG, C_TOPIC_LEN, C_TOPIC_POS,
    D_FLAGS, D_KEYS_COUNT, D_KEYS_START, D_TAGS_CODE, H_SEQ, HINT_CAPACITY, MAGIC_V1, MAGIC_V2,
    MIN_RECORD_SIZE, TRANSACTION_MASK,
)
from . import codec as _codec

__all__ = ["dispatch_hinted"]


def dispatch_hinted(ring: Any, head: int, r: int, buf: Any, file_from: int, pos: int, limit: int, cols: Any,
                    disp: Any, keys: Any, cap: int) -> tuple[int, int, int, int, int, int]:
    """``(count, end_pos, nkeys, next_hint, first, r)``: the records from ``pos`` that hints from
    number ``r`` on (``head`` written) describe, into the columns and rows dispatch_batch fills; the
    number of the first one's hint, and the hint to look at next."""
    n = nk = 0
    first = -1
    next_hint = -1
    if head - r > HINT_CAPACITY:  # overwritten since: the oldest hint still there
        r = head - HINT_CAPACITY
    while n < cap and r < head:
        e = ring[r & (HINT_CAPACITY - 1)]
        s1 = int(e[H_SEQ])
        if s1 != r:  # -1: invalidated (skip it); newer: hints r .. s1 - capacity were overwritten
            r = max(r + 1, s1 - HINT_CAPACITY + 1)  # only forward, whatever the ring holds
            continue
        phys, sz, q, qoff, ts, tags, key = (int(x) for x in e[1:])
        if int(e[H_SEQ]) != s1:
            break  # overwritten while read
        at = file_from + pos
        if phys < at:  # a record dispatched already
            r += 1
            continue
        if phys > at:  # the record at pos has no hint
            next_hint = phys
            break
        size, nkr, tlen = sz & 0xFFFFFFFF, (sz >> 32) & 0xFF, (sz >> 40) & 0xFFFF
        qid, trel = q & 0xFFFFFFFF, q >> 32
        if size < MIN_RECORD_SIZE or size > limit - pos or trel + tlen > size or nkr > 1:
            next_hint = at  # not a hint this reader can use: parse this one record
            break
        h_size, magic, _crc, h_qid, _flag, h_qoff, h_phys, sysf, _born = _codec._HEAD.unpack_from(buf, pos)
        if (h_size != size or magic not in (MAGIC_V1, MAGIC_V2) or h_qid != qid or h_qoff != qoff
                or h_phys != phys or sysf & TRANSACTION_MASK):
            next_hint = at  # not the record this hint describes: parse this one record
            break
        cols[C_POSITION, n], cols[C_SIZE, n], cols[C_SYS_FLAG, n] = pos, size, sysf
        cols[C_QUEUE_ID, n], cols[C_QUEUE_OFFSET, n], cols[C_STORE_TIMESTAMP, n] = qid, qoff, ts
        cols[C_TOPIC_POS, n], cols[C_TOPIC_LEN, n] = pos + trel, tlen
        disp[D_TAGS_CODE, n], disp[D_FLAGS, n] = tags, 0
        disp[D_KEYS_START, n], disp[D_KEYS_COUNT, n] = nk, nkr
        if nkr:
            keys[nk] = key
            nk += 1
        if n == 0:
            first = r
        n += 1
        pos += size
        r += 1
    return n, pos, nk, next_hint, first if first >= 0 else r, r
