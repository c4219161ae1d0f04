/*
 * rmq_jhash.h - Java String.hashCode over ASCII bytes, inline (plain C99, no Python.h).
 *
 * For the dispatch kernel (csrc/rmq_dispatch.c) and for the put that leaves a dispatch hint
 * (rmqcore/_native/appender.pyx): an out-of-line call cost the put about a third of its hashing.
 * rmq_java_hash_ascii (rmq_dispatch.h) is the same function, exported.
 */
#ifndef RMQ_JHASH_H
#define RMQ_JHASH_H

#include <stddef.h>
#include <stdint.h>

#include "rmq_endian.h"

#define RMQ_JH_P4 923521u     /* 31^4 */
#define RMQ_JH_P8 2487512833u /* 31^8 mod 2^32 */

/* sum b[i] 31^(7-i) over the eight bytes of x (b[0] in the low bits), mod 2^32, formed in
 * SIMD-within-a-register lanes: pairs 31 b + b' (< 2^13, 16-bit lanes), then 4-byte groups
 * (< 2^23, 32-bit lanes), so one multiply serves several bytes and no lane carries into the next. */
static inline uint32_t rmq_jh_block8(uint64_t x)
{
    const uint64_t q = (x & 0x00FF00FF00FF00FFull) * 31u + ((x >> 8) & 0x00FF00FF00FF00FFull);
    const uint64_t g = (q & 0x0000FFFF0000FFFFull) * 961u + ((q >> 16) & 0x0000FFFF0000FFFFull);
    return (uint32_t)g * RMQ_JH_P4 + (uint32_t)(g >> 32);
}

/* Java hash continued (h = hash so far) over bytes that are all below 0x80 (each its own UTF-16
 * unit): eight units per step of the h chain (3 multiplies instead of 8), then four, then one.
 * (Summing independent blocks times powers of 31 shortens the chain but measured slower: the key
 * hashes of a record already overlap.) */
static inline uint32_t rmq_jhash_ascii(uint32_t h, const unsigned char *s, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        h = h * RMQ_JH_P8 + rmq_jh_block8(rmq_load_le64(s + i));
    if (i + 4 <= n) {
        h = h * RMQ_JH_P4 + s[i] * 29791u + s[i + 1] * 961u + s[i + 2] * 31u + s[i + 3];
        i += 4;
    }
    for (; i < n; i++)
        h = h * 31u + s[i];
    return h;
}

#endif /* RMQ_JHASH_H */
