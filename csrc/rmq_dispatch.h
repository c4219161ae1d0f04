/*
 * rmq_dispatch.h - ReputMessageService's per-record work (plain C99, no Python.h).
 *
 * For each CommitLog record that rmq_check_record accepts: the decode_batch columns, the tagsCode
 * (Java String.hashCode of the TAGS property), dispatch flags, and the IndexService hashes of the
 * record's keys (UNIQ_KEY first, then the KEYS tokens split on ' ', empty tokens skipped), each
 * the Java hash of topic + "#" + key computed incrementally (no string is built).
 *
 * Properties (MessageDecoder.string2messageProperties) are parsed on the raw UTF-8 bytes: segments
 * split on 0x02, a segment "NAME\x01value" counts when the value is non-empty, the last one wins.
 * Values are decoded from UTF-8 only to be hashed, as UTF-16 code units; invalid UTF-8 is decoded
 * as Python's bytes.decode("utf-8", "replace") does (one U+FFFD per maximal invalid subpart).
 *
 * Safety contract as rmq_codec.h: 0 <= pos <= limit and buf[0, limit) readable, checked by the
 * caller; nothing outside [pos, limit) is read, whatever the bytes.
 */
#ifndef RMQ_DISPATCH_H
#define RMQ_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "rmq_codec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rows of the dispatch output (int64, shape (RMQ_DISPATCH_NROWS, cap)) */
enum { RMQ_D_TAGS_CODE, RMQ_D_FLAGS, RMQ_D_KEYS_START, RMQ_D_KEYS_COUNT, RMQ_DISPATCH_NROWS };

/* the delay topic (TopicValidator.RMQ_SYS_SCHEDULE_TOPIC; rmqcore.wire.SCHEDULE_TOPIC, checked at import) */
#define RMQ_SCHEDULE_TOPIC "SCHEDULE_TOPIC_XXXX"

/* RMQ_D_FLAGS bits */
#define RMQ_DF_SCHEDULE 1 /* topic is SCHEDULE_TOPIC_XXXX: tagsCode becomes a delivery time */
#define RMQ_DF_BAD_UTF8 2 /* topic or properties are not valid UTF-8 (hashed with U+FFFD) */

/* returned instead of a status when the first record's keys exceed keys_cap; *nkeys = its key count */
#define RMQ_DISPATCH_E_KEYS (-100)

/* Why a Dispatcher run stopped before its limit (rmqcore.layout.STOP_*, checked at import) */
enum {
    RMQ_STOP_NONE = 0,    /* ran to its limit, or the walk met a status */
    RMQ_STOP_QUEUE = 1,   /* a record needs its queue's file bound (unbound, or the bound one is full) */
    RMQ_STOP_SPECIAL = 2, /* a record needs the general path (the reason: RMQ_SPECIAL_*) */
    RMQ_STOP_INDEX = 3,   /* the index file is unbound or full before a record's key */
    RMQ_STOP_SEG = 4      /* the segment-index output is full */
};

/* Why a record needs the general path (rmqcore.layout.SPECIAL_*) */
enum {
    RMQ_SPECIAL_FLAGS = 0,       /* the delay topic (tagsCode = delivery time) or invalid UTF-8 */
    RMQ_SPECIAL_QUEUE_POS = 1,   /* its queue offset is not where its queue's file is */
    RMQ_SPECIAL_KEYS = 2         /* more keys than the kernel's scratch holds */
};

/* getMessage's unit loop outcome (rmqcore.layout.SELECT_*) */
enum { RMQ_SELECT_NO_MATCH = 0, RMQ_SELECT_FOUND = 1, RMQ_SELECT_REMOVING = 2 };

/* Java String.hashCode continued (h = hash so far) over the UTF-16 units of UTF-8 bytes s[0, n);
 * invalid sequences count as U+FFFD each and set *bad to 1 (it is never cleared). */
uint32_t rmq_java_hash_utf8(uint32_t h, const unsigned char *s, size_t n, int *bad);

/* rmq_java_hash_utf8 for bytes that are all below 0x80 (the caller knows: an ASCII str). */
uint32_t rmq_java_hash_ascii(uint32_t h, const unsigned char *s, size_t n);

/* 1 if s[0, n) is valid UTF-8 (Python's strict decoder accepts it), else 0. */
int rmq_utf8_valid(const unsigned char *s, size_t n);

/* Walk records from pos like rmq_decode_batch (same statuses and columns; cols/disp strides in
 * int64 elements) and fill, per record n: disp row r at disp[r * disp_rs + n * disp_cs], its key
 * hashes at keys[i * keys_stride] for i in [*nkeys before it, *nkeys after it). Stops before a
 * record whose keys do not fit in keys_cap (status RMQ_ST_MSG, end at its start); if that is the
 * first record, returns RMQ_DISPATCH_E_KEYS with *nkeys = the keys it needs. */
int rmq_dispatch_batch(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t cap,
                       int64_t *cols, int64_t cols_rs, int64_t cols_cs, int64_t *disp, int64_t disp_rs,
                       int64_t disp_cs, int64_t *keys, int64_t keys_stride, int64_t keys_cap, int64_t *count,
                       int64_t *end_pos, int64_t *nkeys);

/* The records from pos that dispatch hints describe (rmq_hints.h), into the columns and rows
 * rmq_dispatch_batch fills (cols/disp strides in int64 elements between rows, one between
 * records; keys one apart): at most cap records, each checked against its header, stopping at
 * the first one without a usable hint or past limit. ring holds `head` hints; *ri is where the
 * reader looks first (it only moves forward). Returns the count; *end_pos is where they end,
 * *nkeys the keys written, *next_hint the offset of the next hinted record past a gap, or the
 * record's own offset when its hint cannot be used (-1: none known, so the caller had better
 * parse a whole chunk); *first the number of the first record's hint (*ri when none is returned):
 * where a caller that dispatches only some of the records looks again, without walking once more
 * the hints of records dispatched before (with a stop at every record, as when each record is a
 * queue's first, that walk made dispatch quadratic). */
int64_t rmq_dispatch_hinted(const int64_t *ring, int64_t head, int64_t *ri, const unsigned char *buf,
                            int64_t file_from, int64_t pos, int64_t limit, int64_t cap, int64_t *cols,
                            int64_t cols_rs, int64_t *disp, int64_t disp_rs, int64_t *keys, int64_t *end_pos,
                            int64_t *nkeys, int64_t *next_hint, int64_t *first);

#ifdef __cplusplus
}
#endif

#endif /* RMQ_DISPATCH_H */
