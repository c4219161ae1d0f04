/*
 * rmq_lookup.h - does a record carry a message key? (the exact re-check of queryMessage answers)
 *
 * RocketMQ's index stores a 4-byte hash of "topic#key"; rmqcore re-checks every hit against the
 * record: the key must be the UNIQ_KEY property or a token of KEYS (split on ' ', empty tokens
 * dropped), with properties read as MessageDecoder.string2messageProperties reads them (segments
 * split on 0x02, name 0x01 value with both non-empty, the first 0x01 separating them, later
 * duplicates winning).
 */
#ifndef RMQ_LOOKUP_H
#define RMQ_LOOKUP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a key lookup answers instead of a result when it cannot give one (rmqcore.layout.LOOKUP_*,
 * checked at import): the store dispatches first and asks again, or its general path answers. */
enum { RMQ_LOOKUP_DISPATCH_FIRST = 1, RMQ_LOOKUP_CANNOT_ANSWER = 2 };

/* 1 when props[0, n) names key[0, klen) as UNIQ_KEY or as a KEYS token, 0 when not, -1 when the
 * properties are not valid UTF-8 (the caller decides with the decoded text instead). */
int rmq_props_have_key(const unsigned char *props, size_t n, const unsigned char *key, size_t klen);

#ifdef __cplusplus
}
#endif

#endif /* RMQ_LOOKUP_H */
