/*
 * rmq_keycache.h - the newest index entry of each key hash, in memory (a lookup accelerator).
 *
 * MessageStore.lookup returns the newest message with a key. RocketMQ's index answers it with a
 * slot read and a chain walk in the index file (two dependent cache misses into a 420 MB file,
 * before the record itself). This table maps each 32-bit index key hash to the largest physical
 * offset indexed with it, so a lookup is one probe into a table sized to the keys actually
 * stored, then the record. It is derived data, rebuilt from the index files by reading their
 * entries sequentially; it never answers alone: the caller re-checks the record (CRC, topic,
 * key), and on any mismatch (a hash collision, a deleted or corrupt record) takes the full walk.
 * It also counts the entries of each hash (up to "more than one"): for a hash indexed once, that
 * entry is all a walk would find, which answers query_by_key's "every message with the key".
 */
#ifndef RMQ_KEYCACHE_H
#define RMQ_KEYCACHE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t phys; /* -1: empty */
    int32_t hash;
    int32_t count; /* entries taken in with this hash: 1, or 2 for more than one */
} rmq_kc_slot;

typedef struct {
    rmq_kc_slot *t;
    uint64_t cap; /* a power of two */
    uint64_t used;
    size_t bytes; /* of the mapping */
} rmq_keycache;

/* 0, or -1 when out of memory. */
int rmq_kc_init(rmq_keycache *c, uint64_t cap);
void rmq_kc_free(rmq_keycache *c);
/* Record phys for hash (kept when larger than the one held). 0, or -1 when out of memory. */
int rmq_kc_put(rmq_keycache *c, int32_t hash, int64_t phys);
/* The largest phys recorded for hash, or -1. */
int64_t rmq_kc_get(const rmq_keycache *c, int32_t hash);
/* rmq_kc_get, and in *n how many entries were taken in with hash: 0, 1, or 2 for more than one.
 * With 1, that entry is the only one the ingested index files hold for the hash (entries are
 * never taken in twice: the caller ingests each file's range once), so an index walk for the
 * hash without a time window would find exactly it. */
int64_t rmq_kc_get_n(const rmq_keycache *c, int32_t hash, int32_t *n);
/* Start loading the slot where a probe for hash begins (a hint: no effect on the contents). */
void rmq_kc_prefetch(const rmq_keycache *c, int32_t hash);
/* Add entries [from, to) of a mapped index file (entry i at 40 + slots*4 + i*20: hash, phys, ...).
 * The caller bounds to against the file's entry count and size. 0, or -1 when out of memory. */
int rmq_kc_ingest(rmq_keycache *c, const unsigned char *index, uint32_t slots, uint32_t from, uint32_t to);

#ifdef __cplusplus
}
#endif

#endif /* RMQ_KEYCACHE_H */
