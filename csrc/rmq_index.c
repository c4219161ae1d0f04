/*
 * rmq_index.c - RocketMQ IndexFile kernels; see rmq_index.h for the layout and the contract.
 *
 * Mirrors IndexFile.putKey / selectPhyOffset of RocketMQ 4.9.8 and 5.3.3 (identical there),
 * including their arithmetic: Java long subtraction and addition wrap around, and long division
 * truncates toward zero, exactly like the unsigned/C99 expressions below.
 */
#include "rmq_index.h"

#include <string.h>

#include "rmq_endian.h"

#define HDR_BEGIN_TS 0
#define HDR_END_TS 8
#define HDR_BEGIN_PHY 16
#define HDR_END_PHY 24
#define HDR_SLOT_COUNT 32
#define HDR_INDEX_COUNT 36

static inline int32_t clamp_count(int32_t c) { return c <= 0 ? 1 : c; }

static inline int64_t wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }

static inline int64_t wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

static inline int64_t load_host64(const void *base, size_t i)
{
    int64_t v;
    memcpy(&v, (const unsigned char *)base + i * sizeof v, sizeof v);
    return v;
}

uint64_t rmq_index_file_size(uint32_t slots, uint32_t entries)
{
    return (uint64_t)RMQ_INDEX_HEADER_SIZE + (uint64_t)slots * RMQ_INDEX_SLOT_SIZE +
           (uint64_t)entries * RMQ_INDEX_ENTRY_SIZE;
}

void rmq_index_read_header(const unsigned char *buf, rmq_index_header *h)
{
    h->begin_timestamp = rmq_load_be64s(buf + HDR_BEGIN_TS);
    h->end_timestamp = rmq_load_be64s(buf + HDR_END_TS);
    h->begin_phy_offset = rmq_load_be64s(buf + HDR_BEGIN_PHY);
    h->end_phy_offset = rmq_load_be64s(buf + HDR_END_PHY);
    h->hash_slot_count = rmq_load_be32s(buf + HDR_SLOT_COUNT);
    h->index_count = rmq_load_be32s(buf + HDR_INDEX_COUNT);
}

int rmq_index_check(const unsigned char *buf, size_t len, uint32_t slots, uint32_t entries)
{
    if ((uint64_t)len < rmq_index_file_size(slots, entries))
        return RMQ_INDEX_E_SHORT;
    if (rmq_load_be32s(buf + HDR_INDEX_COUNT) > (int64_t)entries)
        return RMQ_INDEX_E_COUNT;
    return RMQ_INDEX_OK;
}

int rmq_index_put(unsigned char *buf, uint32_t slots, uint32_t entries, int32_t key_hash,
                  int64_t phy_offset, int64_t store_timestamp)
{
    const int32_t count = clamp_count(rmq_load_be32s(buf + HDR_INDEX_COUNT));
    unsigned char *slot, *entry;
    int32_t slot_value;
    int64_t begin_ts, time_diff;

    if ((int64_t)count >= (int64_t)entries)
        return 0; /* full: the caller rolls to a new file */
    slot = buf + RMQ_INDEX_HEADER_SIZE + (size_t)((uint32_t)key_hash % slots) * RMQ_INDEX_SLOT_SIZE;
    slot_value = rmq_load_be32s(slot);
    if (slot_value <= 0 || slot_value > count)
        slot_value = 0;

    /* timeDiff in seconds from the header's beginTimestamp *before* this put sets it: for the first
     * entry of a rolled file that is the previous file's end (RocketMQ's quirk, kept on purpose) */
    begin_ts = rmq_load_be64s(buf + HDR_BEGIN_TS);
    time_diff = wrap_sub(store_timestamp, begin_ts) / 1000;
    if (begin_ts <= 0)
        time_diff = 0;
    else if (time_diff > INT32_MAX)
        time_diff = INT32_MAX;
    else if (time_diff < 0)
        time_diff = 0;

    entry = buf + RMQ_INDEX_HEADER_SIZE + (size_t)slots * RMQ_INDEX_SLOT_SIZE +
            (size_t)count * RMQ_INDEX_ENTRY_SIZE;
    rmq_store_be32(entry, (uint32_t)key_hash);
    rmq_store_be64(entry + 4, (uint64_t)phy_offset);
    rmq_store_be32(entry + 12, (uint32_t)time_diff);
    rmq_store_be32(entry + 16, (uint32_t)slot_value);
    rmq_publish_be32(slot, (uint32_t)count); /* after the entry it names (lock-free readers) */

    if (count <= 1) {
        rmq_store_be64(buf + HDR_BEGIN_PHY, (uint64_t)phy_offset);
        rmq_store_be64(buf + HDR_BEGIN_TS, (uint64_t)store_timestamp);
    }
    if (slot_value == 0)
        rmq_store_be32(buf + HDR_SLOT_COUNT, rmq_load_be32(buf + HDR_SLOT_COUNT) + 1u);
    rmq_publish_be32(buf + HDR_INDEX_COUNT, (uint32_t)count + 1u);
    rmq_store_be64(buf + HDR_END_PHY, (uint64_t)phy_offset);
    rmq_store_be64(buf + HDR_END_TS, (uint64_t)store_timestamp);
    return 1;
}

size_t rmq_index_put_batch(unsigned char *buf, uint32_t slots, uint32_t entries, const void *key_hashes,
                           const void *phy_offsets, const void *store_timestamps, size_t n)
{
    size_t i;
    /* slots are random accesses into a table larger than the caches: prefetch a few puts ahead */
    const size_t ahead = 8;
    unsigned char *slots_base = buf + RMQ_INDEX_HEADER_SIZE;
    for (i = 0; i < n && i < ahead; i++)
        __builtin_prefetch(slots_base + (size_t)((uint32_t)(int32_t)load_host64(key_hashes, i) % slots) *
                           RMQ_INDEX_SLOT_SIZE, 1);
    for (i = 0; i < n; i++) {
        if (i + ahead < n)
            __builtin_prefetch(slots_base +
                               (size_t)((uint32_t)(int32_t)load_host64(key_hashes, i + ahead) % slots) *
                                   RMQ_INDEX_SLOT_SIZE, 1);
        if (!rmq_index_put(buf, slots, entries, (int32_t)load_host64(key_hashes, i),
                           load_host64(phy_offsets, i), load_host64(store_timestamps, i)))
            break;
    }
    return i;
}

void rmq_index_walk_start(const unsigned char *buf, uint32_t slots, int32_t key_hash, uint64_t max_num,
                          uint64_t max_steps, rmq_index_walk *w)
{
    const int32_t count = clamp_count(rmq_observe_be32s(buf + HDR_INDEX_COUNT));
    const int32_t slot_value = rmq_observe_be32s(buf + RMQ_INDEX_HEADER_SIZE +
                                              (size_t)((uint32_t)key_hash % slots) * RMQ_INDEX_SLOT_SIZE);
    w->index_count = count;
    w->begin_ts = rmq_load_be64s(buf + HDR_BEGIN_TS);
    w->steps_left = max_steps;
    w->results_left = max_num;
    w->next = (slot_value <= 0 || slot_value > count || count <= 1) ? 0 : slot_value;
}

size_t rmq_index_walk_run(const unsigned char *buf, uint32_t slots, uint32_t entries, int32_t key_hash,
                          int64_t begin, int64_t end, rmq_index_walk *w, int64_t *out, size_t cap)
{
    const unsigned char *base = buf + RMQ_INDEX_HEADER_SIZE + (size_t)slots * RMQ_INDEX_SLOT_SIZE;
    size_t n = 0;
    int32_t cur = w->next;

    while (cur != 0) {
        const unsigned char *entry;
        int32_t hash, time_diff, prev;
        int64_t phy, t;

        if (w->results_left == 0 || w->steps_left == 0)
            break;
        /* RocketMQ reads entry indexCount == N past the buffer and stops on the exception */
        if ((uint32_t)cur >= entries)
            break;
        if (n == cap) {
            w->next = cur; /* out is full: resume here */
            return n;
        }
        w->steps_left--;
        entry = base + (size_t)cur * RMQ_INDEX_ENTRY_SIZE;
        hash = rmq_load_be32s(entry);
        phy = rmq_load_be64s(entry + 4);
        time_diff = rmq_load_be32s(entry + 12);
        prev = rmq_load_be32s(entry + 16);
        if (time_diff < 0)
            break;
        t = wrap_add(w->begin_ts, (int64_t)time_diff * 1000);
        if (hash == key_hash && t >= begin && t <= end) {
            out[n++] = phy;
            w->results_left--;
        }
        if (prev <= 0 || prev > w->index_count || prev == cur || t < begin)
            break;
        cur = prev;
    }
    w->next = 0;
    return n;
}
