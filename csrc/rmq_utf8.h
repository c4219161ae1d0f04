/*
 * rmq_utf8.h - one UTF-8 sequence, decoded as CPython's strict decoder reads it (Unicode "maximal
 * subpart" replacement; overlongs, surrogates and code points above U+10FFFF rejected). Shared by
 * the dispatch kernel (Java hashes of decoded text) and the Arrow column builder (U+FFFD output).
 */
#ifndef RMQ_UTF8_H
#define RMQ_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* The sequence at s[0, n), n >= 1, lead byte >= 0x80: returns the bytes it takes and sets *cp to
 * its code point and *valid to 1; for an invalid one, the length of the maximal invalid subpart
 * (>= 1, to be replaced by one U+FFFD), *cp = 0xFFFD and *valid = 0. */
static inline size_t rmq_utf8_seq(const unsigned char *s, size_t n, uint32_t *cp, int *valid)
{
    unsigned c = s[0];
    unsigned lo = 0x80, hi = 0xBF;
    size_t need, k;
    uint32_t v;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
        v = c & 0x1Fu;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        v = c & 0x0Fu;
        if (c == 0xE0)
            lo = 0xA0; /* overlong */
        else if (c == 0xED)
            hi = 0x9F; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        v = c & 0x07u;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else { /* continuation byte, C0/C1, F5..FF */
        *cp = 0xFFFDu;
        *valid = 0;
        return 1;
    }
    k = 1;
    if (n > 1 && s[1] >= lo && s[1] <= hi) {
        v = (v << 6) | (s[1] & 0x3Fu);
        k = 2;
        while (k < need && k < n && (s[k] & 0xC0u) == 0x80u) {
            v = (v << 6) | (s[k] & 0x3Fu);
            k++;
        }
    }
    if (k < need) {
        *cp = 0xFFFDu;
        *valid = 0;
        return k;
    }
    *cp = v;
    *valid = 1;
    return k;
}

#endif /* RMQ_UTF8_H */
