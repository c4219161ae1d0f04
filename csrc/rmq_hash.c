/*
 * rmq_hash.c - Java String.hashCode() kernels, see rmq_hash.h.
 *
 * Four units at a time: h' = h*31^4 + a*31^3 + b*31^2 + c*31 + d (mod 2^32), which shortens the
 * serial multiply chain; unsigned arithmetic gives Java's wrap-around without undefined behaviour.
 */
#include "rmq_hash.h"

#define P1 31u
#define P2 961u
#define P3 29791u
#define P4 923521u

uint32_t rmq_java_hash_ucs1(uint32_t h, const uint8_t *s, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        h = h * P4 + s[i] * P3 + s[i + 1] * P2 + s[i + 2] * P1 + s[i + 3];
    for (; i < n; i++)
        h = h * P1 + s[i];
    return h;
}

uint32_t rmq_java_hash_ucs2(uint32_t h, const uint16_t *s, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        h = h * P4 + s[i] * P3 + s[i + 1] * P2 + s[i + 2] * P1 + s[i + 3];
    for (; i < n; i++)
        h = h * P1 + s[i];
    return h;
}

uint32_t rmq_java_hash_ucs4(uint32_t h, const uint32_t *s, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        uint32_t c = s[i];
        if (c > 0xFFFFu) {
            c -= 0x10000u;
            h = h * P1 + (0xD800u + (c >> 10));
            h = h * P1 + (0xDC00u + (c & 0x3FFu));
        } else {
            h = h * P1 + c;
        }
    }
    return h;
}
