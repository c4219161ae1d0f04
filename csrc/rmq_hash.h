/*
 * rmq_hash.h - Java String.hashCode() over the code points of a Python str, for rmqcore.
 *
 * Plain C99, no Python.h. Java hashes UTF-16 code units: h = 31 * h + unit with int32 wrap-around.
 * A code point above U+FFFF counts as its surrogate pair (two units); every other code point,
 * including a lone surrogate U+D800..U+DFFF, is one unit. The three entry points take the three
 * storage kinds of a CPython str (Latin-1, UCS-2, UCS-4); `h` is the hash so far (0 to start),
 * which allows hashing a string in pieces. rmq_hash_as_int32 turns the result into Java's int.
 */
#ifndef RMQ_HASH_H
#define RMQ_HASH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_MSC_VER) && !defined(__cplusplus)
#define RMQ_HASH_INLINE static __inline
#else
#define RMQ_HASH_INLINE static inline
#endif

uint32_t rmq_java_hash_ucs1(uint32_t h, const uint8_t *s, size_t n);
uint32_t rmq_java_hash_ucs2(uint32_t h, const uint16_t *s, size_t n);
uint32_t rmq_java_hash_ucs4(uint32_t h, const uint32_t *s, size_t n);

/* the unsigned hash as Java's signed int */
RMQ_HASH_INLINE int32_t rmq_hash_as_int32(uint32_t h)
{
    return h <= 0x7FFFFFFFu ? (int32_t)h : (int32_t)(h - 0x80000000u) - 0x7FFFFFFF - 1;
}

/* RocketMQ IndexService: keyHash = abs(hashCode), and Math.abs(Integer.MIN_VALUE) < 0 becomes 0 */
RMQ_HASH_INLINE int32_t rmq_index_key_hash(int32_t hash_code)
{
    return hash_code == (-0x7FFFFFFF - 1) ? 0 : (hash_code < 0 ? -hash_code : hash_code);
}

/* IndexFile slot of a (non-negative) key hash; slot_count > 0 */
RMQ_HASH_INLINE uint32_t rmq_index_slot(int32_t key_hash, uint32_t slot_count)
{
    return (uint32_t)key_hash % slot_count;
}

#ifdef __cplusplus
}
#endif

#endif /* RMQ_HASH_H */
