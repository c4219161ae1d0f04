/*
 * rmq_hints.h - dispatch hints: what a put already knows about its record, handed to the reput
 * thread so dispatch does not parse the record again (plain C99 + GCC atomics, no Python.h).
 *
 * A ring of RMQ_HINT_CAPACITY entries of RMQ_HINT_FIELDS int64 each (rmqcore/layout.py names the
 * same layout for the pure twins), written by the one writer that holds the CommitLog's lock and
 * read by the one dispatcher that holds the store's dispatch lock. Entry k of the ring holds hint
 * number n when n % RMQ_HINT_CAPACITY == k; a word `head` counts the hints written.
 *
 *   field  value
 *     0    n, the hint's number (-1: empty, invalidated, or being written)
 *     1    the record's physical offset
 *     2    size | key count << 32 | topic length << 40
 *     3    queue id | (offset of the topic's first byte in the record) << 32
 *     4    queue offset
 *     5    store timestamp
 *     6    tagsCode (0 without tags)
 *     7    the index hash of topic + "#" + its key (with a key count of 1)
 *
 * Appender.put gives a hint only for a record whose dispatch needs nothing else: a NOT_TYPE
 * record (no transaction), an ASCII topic that is not the delay topic, properties built from ASCII
 * `tags` and `keys` arguments with at most one KEYS token. Those it hashes from the arguments
 * (callgrind: 255 instructions more per put), and dispatch spends 613 instructions on a hinted
 * record against 1673 on one it checks and parses. Appender.put_batch gives one to each record of a
 * batch whose messages share one properties object (none, or one mapping for all) when the first
 * record qualifies as above: the dispatch kernel reads that record's properties once
 * (appender_hints.pxi). Per-message properties get none: finding TAGS and KEYS in each raw string
 * cost the writer 60-100 ns a message, more than it saved the reput thread. The writer writes the
 * hint after the record's bytes and before it publishes the record's end, so a record that a reader
 * may dispatch has its hint written or none at all; and every rebind of the writer to a file (a
 * roll, set_end, close) invalidates the whole ring, as its position may move back and reuse offsets.
 * Field 0 works as a sequence lock: -1, then the fields, then n (release). A reader that sees the
 * same n before and after reading the fields read one whole hint. A reader also checks the hint
 * against the record's header (size, queue id, queue offset, physical offset, transaction type),
 * so a hint can only ever be used for the record it describes.
 */
#ifndef RMQ_HINTS_H
#define RMQ_HINTS_H

#include <stdint.h>

#define RMQ_HINT_CAPACITY 32768 /* a power of two; > the records of the reput thread's LIVE_LAG */
#define RMQ_HINT_FIELDS 8

enum { RMQ_H_SEQ, RMQ_H_PHYS, RMQ_H_SIZE, RMQ_H_QUEUE, RMQ_H_QOFF, RMQ_H_TS, RMQ_H_TAGS, RMQ_H_KEY };

/* Write hint number n (the writer's count; the caller then publishes head = n + 1). */
static inline void rmq_hint_put(int64_t *ring, int64_t n, int64_t phys, int64_t size, int64_t nkeys,
                                int64_t topic_len, int64_t queue_id, int64_t topic_rel, int64_t qoff,
                                int64_t ts, int64_t tags_code, int64_t key)
{
    int64_t *e = ring + (n & (RMQ_HINT_CAPACITY - 1)) * RMQ_HINT_FIELDS;
    __atomic_store_n(&e[RMQ_H_SEQ], (int64_t)-1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE); /* -1 is seen before any field changes */
    __atomic_store_n(&e[RMQ_H_PHYS], phys, __ATOMIC_RELAXED);
    __atomic_store_n(&e[RMQ_H_SIZE], size | nkeys << 32 | topic_len << 40, __ATOMIC_RELAXED);
    __atomic_store_n(&e[RMQ_H_QUEUE], queue_id | topic_rel << 32, __ATOMIC_RELAXED);
    __atomic_store_n(&e[RMQ_H_QOFF], qoff, __ATOMIC_RELAXED);
    __atomic_store_n(&e[RMQ_H_TS], ts, __ATOMIC_RELAXED);
    __atomic_store_n(&e[RMQ_H_TAGS], tags_code, __ATOMIC_RELAXED);
    __atomic_store_n(&e[RMQ_H_KEY], key, __ATOMIC_RELAXED);
    __atomic_store_n(&e[RMQ_H_SEQ], n, __ATOMIC_RELEASE);
}

/* Make every hint in the ring unusable (the writer, when its position may move back). */
static inline void rmq_hints_invalidate(int64_t *ring)
{
    int64_t k;
    for (k = 0; k < RMQ_HINT_CAPACITY; k++)
        __atomic_store_n(&ring[k * RMQ_HINT_FIELDS + RMQ_H_SEQ], (int64_t)-1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

#endif /* RMQ_HINTS_H */
