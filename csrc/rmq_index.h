/*
 * rmq_index.h - RocketMQ IndexFile kernels (putKey, selectPhyOffset) over a mapped buffer.
 *
 * Plain C99, no Python.h: every function may run without the GIL. Layout (all big-endian):
 *
 *     [0, 40)                       header: beginTimestamp i64 | endTimestamp i64 |
 *                                           beginPhyOffset i64 | endPhyOffset i64 |
 *                                           hashSlotCount i32 | indexCount i32
 *     [40, 40 + 4 S)                S slots, i32: number of the newest entry of the slot's chain
 *     [40 + 4 S, 40 + 4 S + 20 N)   N entries: keyHash i32 | phyOffset i64 | timeDiff i32 | prevIndex i32
 *
 * Callers prove once, with rmq_index_check, that the buffer holds the whole geometry and that the
 * header's indexCount is possible (<= N); after that no function reads or writes outside
 * [buf, buf + rmq_index_file_size(S, N)), whatever the slot and prevIndex values say.
 * indexCount <= 0 counts as 1, as RocketMQ's IndexHeader.load does.
 */
#ifndef RMQ_INDEX_H
#define RMQ_INDEX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RMQ_INDEX_HEADER_SIZE 40
#define RMQ_INDEX_SLOT_SIZE 4
#define RMQ_INDEX_ENTRY_SIZE 20

/* statuses of rmq_index_check */
#define RMQ_INDEX_OK 0
#define RMQ_INDEX_E_SHORT (-1) /* buffer shorter than 40 + 4 S + 20 N */
#define RMQ_INDEX_E_COUNT (-2) /* header indexCount > N: no RocketMQ writer produces that */

typedef struct rmq_index_header {
    int64_t begin_timestamp;
    int64_t end_timestamp;
    int64_t begin_phy_offset;
    int64_t end_phy_offset;
    int32_t hash_slot_count;
    int32_t index_count; /* raw, as stored */
} rmq_index_header;

/* a resumable chain walk (selectPhyOffset); next == 0 once the walk is over */
typedef struct rmq_index_walk {
    int32_t next;          /* entry number to read next */
    int32_t index_count;   /* header indexCount (>= 1) when the walk started */
    int64_t begin_ts;      /* header beginTimestamp when the walk started */
    uint64_t steps_left;   /* entries that may still be read (bound against corrupt chains) */
    uint64_t results_left; /* maxNum minus the offsets found so far */
} rmq_index_walk;

/* bytes of an index file with `slots` slots and `entries` entries (both >= 1) */
uint64_t rmq_index_file_size(uint32_t slots, uint32_t entries);

/* buf holds >= 40 bytes */
void rmq_index_read_header(const unsigned char *buf, rmq_index_header *h);

/* RMQ_INDEX_OK, or a negative status; buf may be NULL when len < 40 */
int rmq_index_check(const unsigned char *buf, size_t len, uint32_t slots, uint32_t entries);

/* IndexFile.putKey: 1 when written, 0 when the file is full (indexCount >= N).
 * key_hash is the non-negative IndexService hash (abs(hashCode), MIN_VALUE -> 0). */
int rmq_index_put(unsigned char *buf, uint32_t slots, uint32_t entries, int32_t key_hash,
                  int64_t phy_offset, int64_t store_timestamp);

/* rmq_index_put for items [0, n) of three parallel arrays (host-order int64, any alignment);
 * returns how many were put before the file filled up. Every key_hashes[i] is in [0, INT32_MAX]. */
size_t rmq_index_put_batch(unsigned char *buf, uint32_t slots, uint32_t entries, const void *key_hashes,
                           const void *phy_offsets, const void *store_timestamps, size_t n);

/* Start a selectPhyOffset walk for key_hash (>= 0). */
void rmq_index_walk_start(const unsigned char *buf, uint32_t slots, int32_t key_hash, uint64_t max_num,
                          uint64_t max_steps, rmq_index_walk *w);

/* Continue the walk, writing at most `cap` matching physical offsets to out; returns how many were
 * written. The walk is over when w->next == 0; otherwise call again (out was full). */
size_t rmq_index_walk_run(const unsigned char *buf, uint32_t slots, uint32_t entries, int32_t key_hash,
                          int64_t begin, int64_t end, rmq_index_walk *w, int64_t *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif /* RMQ_INDEX_H */
