# Included by appender.pyx: the properties string of a message that has only tags and keys, built
# in C (RocketMQ's messageProperties2String for KEYS and TAGS): ``_tags_keys_props`` for put,
# ``batch_properties`` for put_batch. Anything else goes to the PutRules (rmqcore.putrules).
cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    /* 1 when a byte of p[0, n) is 0x01 or 0x02 (RocketMQ's property separators), 8 bytes a step:
       a word has a zero byte iff (w - 0x01..01) & ~w & 0x80..80 is nonzero, tested on w ^ 0x01..01
       and w ^ 0x02..02. A tail of 1-7 bytes re-reads the string's last 8 (bytes seen twice change
       nothing); a string shorter than 8 goes byte by byte. Nothing outside p[0, n) is read. */
    static inline int rmq_sep_word(uint64_t w) {
        const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
        const uint64_t a = w ^ ones, b = w ^ (ones << 1);
        return ((((a - ones) & ~a) | ((b - ones) & ~b)) & highs) ? 1 : 0;
    }
    static inline int rmq_has_sep(const char *p, Py_ssize_t n) {
        uint64_t w;
        Py_ssize_t i = 0;
        if (n < 8) {
            for (; i < n; i++)
                if ((unsigned char)(p[i] - 1) < 2)
                    return 1;
            return 0;
        }
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, p + i, 8);
            if (rmq_sep_word(w))
                return 1;
        }
        if (i < n) {
            memcpy(&w, p + n - 8, 8);
            return rmq_sep_word(w);
        }
        return 0;
    }
    /* rmq_has_sep for KEYS, in the same pass: 1 for a separator, else 2 when a byte is ' ' (more
       than one key: no dispatch hint), else 0 */
    static inline int rmq_space_word(uint64_t w) {
        const uint64_t ones = 0x0101010101010101ull, c = w ^ (ones * 0x20);
        return (((c - ones) & ~c) & 0x8080808080808080ull) ? 2 : 0;
    }
    static inline int rmq_keys_scan(const char *p, Py_ssize_t n) {
        uint64_t w;
        Py_ssize_t i = 0;
        int space = 0;
        if (n < 8) {
            for (; i < n; i++) {
                if ((unsigned char)(p[i] - 1) < 2)
                    return 1;
                if (p[i] == ' ')
                    space = 2;
            }
            return space;
        }
        for (; i + 8 <= n; i += 8) {
            memcpy(&w, p + i, 8);
            if (rmq_sep_word(w))
                return 1;
            space |= rmq_space_word(w);
        }
        if (i < n) {
            memcpy(&w, p + n - 8, 8);
            if (rmq_sep_word(w))
                return 1;
            space |= rmq_space_word(w);
        }
        return space;
    }
    """
    bint rmq_has_sep(const char *p, Py_ssize_t n) noexcept nogil
    int rmq_keys_scan(const char *p, Py_ssize_t n) noexcept nogil


cdef inline Py_ssize_t _tags_keys_len(const char *kp, Py_ssize_t kl, const char *tp, Py_ssize_t tl,
                                     int flavour) noexcept nogil:
    """Bytes of the properties string of KEYS ``kp[:kl]`` and TAGS ``tp[:tl]`` (NULL: absent)."""
    cdef Py_ssize_t plen = 0
    if kp != NULL:
        plen += 5 + kl
    if tp != NULL:
        plen += 5 + tl
    if kp != NULL and tp != NULL:
        plen += 1
    if plen and flavour >= 5:
        plen += 1
    return plen


cdef inline void _write_tags_keys(char *d, const char *kp, Py_ssize_t kl, const char *tp, Py_ssize_t tl,
                                  int flavour) noexcept nogil:
    """Write that string (``KEYS\\x01k\\x02TAGS\\x01t``, ``\\x02`` at the end in flavour 5) at ``d``."""
    if kp != NULL:
        memcpy(d, b"KEYS\x01", 5)
        memcpy(d + 5, kp, kl)
        d += 5 + kl
        if tp != NULL:
            d[0] = 2
            d += 1
    if tp != NULL:
        memcpy(d, b"TAGS\x01", 5)
        memcpy(d + 5, tp, tl)
        d += 5 + tl
    if (kp != NULL or tp != NULL) and flavour >= 5:
        d[0] = 2


cdef inline int _tags_keys_props(object tags, object keys, int flavour, unsigned char *stack, rmq_msg *m,
                                 const char **tp, Py_ssize_t *tl, const char **kp, Py_ssize_t *kl) except -1:
    """``put``'s properties from ``tags`` and ``keys``, each None or an ASCII str: refuses a
    separator in either, points ``tp``/``kp`` at their characters and, when the string fits in
    ``stack`` (PROPS_STACK bytes), writes it there and points ``m.props`` at it. Returns
    ``rmq_keys_scan`` of the keys (2: they hold a space)."""
    cdef int key_scan = 0
    cdef Py_ssize_t plen
    if keys is not None:
        kp[0] = <const char *>PyUnicode_DATA(keys)
        kl[0] = PyUnicode_GET_LENGTH(keys)
        key_scan = rmq_keys_scan(kp[0], kl[0])
        if key_scan == 1:
            raise InvalidMessageError("property 'KEYS' contains a \\x01 or \\x02 separator")
    if tags is not None:
        tp[0] = <const char *>PyUnicode_DATA(tags)
        tl[0] = PyUnicode_GET_LENGTH(tags)
        if rmq_has_sep(tp[0], tl[0]):
            raise InvalidMessageError("property 'TAGS' contains a \\x01 or \\x02 separator")
    plen = _tags_keys_len(kp[0], kl[0], tp[0], tl[0], flavour)
    if plen <= PROPS_STACK:
        _write_tags_keys(<char *>stack, kp[0], kl[0], tp[0], tl[0], flavour)
        m.props = stack
        m.props_len = plen
    return key_scan


cdef inline bint _plain(object s) noexcept:
    """None, or a str the kernel encodes itself (exact, ASCII)."""
    return s is None or (PyUnicode_CheckExact(s) and PyUnicode_IS_ASCII(s))


def batch_properties(Py_ssize_t n, tags, keys, int flavour, fallback):
    """The pure twin's ``batch_properties``: the same bytes, with each message whose tags and
    keys are None or ASCII strs (no separator, short enough) encoded here, one bytes object per
    message (one for all with one ``tags`` str and no keys) and no Python call;
    ``fallback(tags, keys)`` builds (and raises for) every other."""
    cdef list out = [None] * n
    cdef Py_ssize_t i, tl, kl, plen
    cdef const char *tp
    cdef const char *kp
    cdef object t = None, k = None, b
    cdef bint one_tag = tags is None or PyUnicode_Check(tags)
    if one_tag:
        t = tags
    else:
        tags = tags if PyList_CheckExact(tags) or PyTuple_CheckExact(tags) else list(tags)
    if keys is not None:
        keys = keys if PyList_CheckExact(keys) or PyTuple_CheckExact(keys) else list(keys)
    if (not one_tag and len(tags) < n) or (keys is not None and len(keys) < n):
        raise InvalidMessageError("tags and keys need one entry per body")
    for i in range(n):
        if one_tag and keys is None and i > 0:
            out[i] = out[0]  # the same bytes: one object (the records then get dispatch hints)
            continue
        if not one_tag:
            t = tags[i]
        if keys is not None:
            k = keys[i]
        if not (_plain(t) and _plain(k)):
            out[i] = fallback(t, k)
            continue
        tp = kp = NULL
        tl = kl = 0
        if k is not None:
            kp = <const char *>PyUnicode_DATA(k)
            kl = PyUnicode_GET_LENGTH(k)
        if t is not None:
            tp = <const char *>PyUnicode_DATA(t)
            tl = PyUnicode_GET_LENGTH(t)
        plen = _tags_keys_len(kp, kl, tp, tl, flavour)
        if plen > MAX_PROPS or (kp != NULL and rmq_has_sep(kp, kl)) or (tp != NULL and rmq_has_sep(tp, tl)):
            out[i] = fallback(t, k)  # raises: a separator, or too long
            continue
        b = PyBytes_FromStringAndSize(NULL, plen)
        _write_tags_keys(PyBytes_AS_STRING(b), kp, kl, tp, tl, flavour)
        out[i] = b
    return out
