/*
 * rmq_crc32.h - CRC-32 (zlib/IEEE) and CRC-32C (Castagnoli) for rmqcore.
 *
 * Plain C99, no Python.h: every function may be called without the GIL and from any thread.
 *
 * Both functions have zlib's chaining semantics: the returned value is the finished CRC of
 * everything seen so far, and passing it back as `crc` continues the computation, so
 *     rmq_crc32(rmq_crc32(0, a, na), b, nb) == rmq_crc32(0, a||b, na + nb)
 * rmq_crc32 equals zlib's crc32(crc, buf, len) / Python's zlib.crc32(data, crc);
 * rmq_crc32c equals the same construction with the Castagnoli polynomial (Kafka's Crc32C,
 * the `crc32c` PyPI package). `buf` may be NULL when `len` is 0.
 *
 * The fastest kernel the CPU supports is chosen once, on first use (x86-64: PCLMULQDQ folding for
 * CRC-32, SSE4.2 crc32 for CRC-32C; aarch64: ARMv8 CRC32 instructions; else slice-by-8 tables).
 */
#ifndef RMQ_CRC32_H
#define RMQ_CRC32_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint32_t rmq_crc32(uint32_t crc, const unsigned char *buf, size_t len);
uint32_t rmq_crc32c(uint32_t crc, const unsigned char *buf, size_t len);

/* Name of the kernel currently used: "vpclmul", "pclmul", "sse42", "armv8" or "slice-by-8". */
const char *rmq_crc32_impl_name(void);
const char *rmq_crc32c_impl_name(void);

/* Testing hooks, process-wide (not meant for production use):
 * rmq_crc_force_portable(on): on != 0 forces the slice-by-8 kernels, 0 restores the dispatch.
 * rmq_crc_force_level(level): 0 = best kernels, 1 = no 256-bit / 3-lane variants (e.g. "pclmul"
 * instead of "vpclmul"; the name stays "sse42" for CRC-32C), 2 = slice-by-8 (= force_portable(1)). */
void rmq_crc_force_portable(int on);
void rmq_crc_force_level(int level);

#ifdef __cplusplus
}
#endif

#endif /* RMQ_CRC32_H */
