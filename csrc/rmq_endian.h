/*
 * rmq_endian.h - portable big-endian loads and stores for rmqcore (header only, plain C99).
 *
 * Every integer in every RocketMQ store file is big-endian (Java ByteBuffer order). These helpers
 * read and write such integers at any (unaligned) address: memcpy into a local compiles to a
 * single load/store, and the byte swap to one bswap/rev instruction where the compiler has a
 * builtin for it. They never read or write outside [p, p + width); callers prove the bounds.
 */
#ifndef RMQ_ENDIAN_H
#define RMQ_ENDIAN_H

#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER) && !defined(__clang__)
#include <stdlib.h>
#define RMQ_INLINE static __inline
#define RMQ_BSWAP16(x) _byteswap_ushort(x)
#define RMQ_BSWAP32(x) _byteswap_ulong(x)
#define RMQ_BSWAP64(x) _byteswap_uint64(x)
#define RMQ_LITTLE_ENDIAN 1 /* every MSVC target is little-endian */
#else
#define RMQ_INLINE static inline
#if defined(__GNUC__) || defined(__clang__)
#define RMQ_BSWAP16(x) __builtin_bswap16(x)
#define RMQ_BSWAP32(x) __builtin_bswap32(x)
#define RMQ_BSWAP64(x) __builtin_bswap64(x)
#else
#define RMQ_BSWAP16(x) ((uint16_t)((((uint16_t)(x)) >> 8) | (((uint16_t)(x)) << 8)))
#define RMQ_BSWAP32(x)                                                                             \
    ((((uint32_t)(x) & 0xff000000u) >> 24) | (((uint32_t)(x) & 0x00ff0000u) >> 8) |                \
     (((uint32_t)(x) & 0x0000ff00u) << 8) | (((uint32_t)(x) & 0x000000ffu) << 24))
#define RMQ_BSWAP64(x)                                                                             \
    ((((uint64_t)RMQ_BSWAP32((uint32_t)(x))) << 32) | (uint64_t)RMQ_BSWAP32((uint32_t)((uint64_t)(x) >> 32)))
#endif
#if defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define RMQ_LITTLE_ENDIAN 0
#elif defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RMQ_LITTLE_ENDIAN 1
#elif defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__ARMEL__) ||    \
    defined(_M_X64) || defined(_M_IX86) || defined(_M_ARM64)
#define RMQ_LITTLE_ENDIAN 1
#else
#error "rmq_endian.h: cannot tell the byte order of this target"
#endif
#endif

#if RMQ_LITTLE_ENDIAN
#define RMQ_BE16(x) RMQ_BSWAP16(x)
#define RMQ_BE32(x) RMQ_BSWAP32(x)
#define RMQ_BE64(x) RMQ_BSWAP64(x)
#else
#define RMQ_BE16(x) (x)
#define RMQ_BE32(x) (x)
#define RMQ_BE64(x) (x)
#endif

RMQ_INLINE uint16_t rmq_load_be16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return (uint16_t)RMQ_BE16(v);
}

RMQ_INLINE uint32_t rmq_load_be32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return (uint32_t)RMQ_BE32(v);
}

RMQ_INLINE uint64_t rmq_load_be64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return (uint64_t)RMQ_BE64(v);
}

/* eight bytes, first byte in the low bits whatever the host byte order (SWAR scans, hashing) */
RMQ_INLINE uint64_t rmq_load_le64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if !RMQ_LITTLE_ENDIAN
    v = RMQ_BSWAP64(v);
#endif
    return v;
}

RMQ_INLINE void rmq_store_be16(void *p, uint16_t v)
{
    v = (uint16_t)RMQ_BE16(v);
    memcpy(p, &v, sizeof v);
}

RMQ_INLINE void rmq_store_be32(void *p, uint32_t v)
{
    v = (uint32_t)RMQ_BE32(v);
    memcpy(p, &v, sizeof v);
}

RMQ_INLINE void rmq_store_be64(void *p, uint64_t v)
{
    v = (uint64_t)RMQ_BE64(v);
    memcpy(p, &v, sizeof v);
}

/* Signed views (Java int/long/short): two's complement conversion, well defined in C99 for the
 * implementation-defined unsigned -> signed direction on every compiler rmqcore supports. */
RMQ_INLINE int16_t rmq_load_be16s(const void *p) { return (int16_t)rmq_load_be16(p); }
RMQ_INLINE int32_t rmq_load_be32s(const void *p) { return (int32_t)rmq_load_be32(p); }
RMQ_INLINE int64_t rmq_load_be64s(const void *p) { return (int64_t)rmq_load_be64(p); }

/* A 4-byte big-endian field published to readers on other threads without a lock (an index
 * file's slots and entry count, read by lookups while the reput thread writes): a release store
 * after the bytes it points at, an acquire load before following it. Plain moves on x86; on arm64
 * the barriers that keep a reader from seeing the count or slot before the entry. A misaligned
 * field (a test's odd buffer) falls back to a plain copy. */
RMQ_INLINE void rmq_publish_be32(void *p, uint32_t v)
{
    v = (uint32_t)RMQ_BE32(v);
    if (((uintptr_t)p & 3u) == 0)
        __atomic_store_n((uint32_t *)p, v, __ATOMIC_RELEASE);
    else
        memcpy(p, &v, sizeof v);
}

RMQ_INLINE int32_t rmq_observe_be32s(const void *p)
{
    uint32_t v;
    if (((uintptr_t)p & 3u) == 0)
        v = __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
    else
        memcpy(&v, p, sizeof v);
    return (int32_t)(uint32_t)RMQ_BE32(v);
}

/* A native int64 word shared between threads without a lock (the CommitLog's live end, the reput
 * thread's GIL request): a release store after what it publishes, an acquire load before using it. */
RMQ_INLINE void rmq_publish_i64(int64_t *p, int64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
RMQ_INLINE int64_t rmq_observe_i64(const int64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

#endif /* RMQ_ENDIAN_H */
