/*
 * rmq_codec.h - RocketMQ CommitLog record codec kernels (plain C99, no Python.h).
 *
 * Byte layout: rmqcore/layout.py and shared/spec/rocketmq-store.md section 1. Every integer is
 * big-endian. These functions are the native half of rmqcore._native.codec; the Cython layer does
 * argument conversion and error mapping, the loops over mapped memory live here and may run
 * without the GIL.
 *
 * Safety contract: every function taking (buf, pos, limit) requires 0 <= pos <= limit and that
 * buf[0, limit) is readable; the caller checks that once. Inside, no byte outside [pos, limit) is
 * ever read, and no field of a record is read before it has been proven inside [pos, pos + size),
 * whatever the input bytes are.
 */
#ifndef RMQ_CODEC_H
#define RMQ_CODEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kernel statuses (= rmqcore.layout.ST_*) */
#define RMQ_ST_MSG 1
#define RMQ_ST_END 0
#define RMQ_ST_BLANK 2
#define RMQ_ST_TORN (-1)
#define RMQ_ST_BAD_MAGIC (-2)
#define RMQ_ST_BAD_SIZE (-3)
#define RMQ_ST_BAD_CRC (-4)

#define RMQ_MAGIC_V1 ((int32_t)0xDAA320A7u)
#define RMQ_MAGIC_V2 ((int32_t)0xDAA320ABu)
#define RMQ_MAGIC_BLANK ((int32_t)0xCBD43194u)
#define RMQ_BLANK_SIZE 8
#define RMQ_MIN_RECORD_SIZE 91
#define RMQ_MAX_PROPERTIES_LEN 32767
#define RMQ_FLAG_BORNHOST_V6 0x10
#define RMQ_FLAG_STOREHOST_V6 0x20

/* rows of decode_batch's output (= rmqcore.layout.C_*) */
enum {
    RMQ_C_POSITION,
    RMQ_C_SIZE,
    RMQ_C_MAGIC,
    RMQ_C_BODY_CRC,
    RMQ_C_QUEUE_ID,
    RMQ_C_FLAG,
    RMQ_C_QUEUE_OFFSET,
    RMQ_C_PHYSICAL_OFFSET,
    RMQ_C_SYS_FLAG,
    RMQ_C_BORN_TIMESTAMP,
    RMQ_C_BORN_HOST_POS,
    RMQ_C_BORN_PORT,
    RMQ_C_STORE_TIMESTAMP,
    RMQ_C_STORE_HOST_POS,
    RMQ_C_STORE_PORT,
    RMQ_C_RECONSUME_TIMES,
    RMQ_C_PREPARED_TX_OFFSET,
    RMQ_C_BODY_POS,
    RMQ_C_BODY_LEN,
    RMQ_C_TOPIC_POS,
    RMQ_C_TOPIC_LEN,
    RMQ_C_PROPERTIES_POS,
    RMQ_C_PROPERTIES_LEN,
    RMQ_NCOLUMNS
};

/* A record that passed rmq_check_record, every field decoded; positions are buffer offsets. */
typedef struct rmq_record {
    int64_t pos;
    int64_t size;
    int32_t magic;
    int32_t body_crc;
    int32_t queue_id;
    int32_t flag;
    int64_t queue_offset;
    int64_t physical_offset;
    int32_t sys_flag;
    int32_t born_port;
    int64_t born_timestamp;
    int64_t born_host_pos; /* address bytes; born_addr_len is 4 or 16 */
    int64_t store_timestamp;
    int64_t store_host_pos;
    int32_t born_addr_len;
    int32_t store_addr_len;
    int32_t store_port;
    int32_t reconsume_times;
    int64_t prepared_tx_offset;
    int64_t body_pos;
    int64_t body_len; /* max(BODYLENGTH, 0) */
    int64_t topic_pos;
    int64_t topic_len;
    int64_t props_pos;
    int64_t props_len;
} rmq_record;

/* One message to encode: scalar fields plus borrowed byte ranges. */
typedef struct rmq_msg {
    const unsigned char *topic;
    const unsigned char *born_addr; /* born_addr_len bytes: 4 or 16 */
    const unsigned char *store_addr;
    const unsigned char *body;
    const unsigned char *props;
    int64_t topic_len;
    int64_t body_len;
    int64_t props_len;
    int32_t born_addr_len;
    int32_t store_addr_len;
    int32_t queue_id;
    int32_t flag;
    int32_t sys_flag; /* V6 bits already consistent with the address lengths */
    int32_t born_port;
    int32_t store_port;
    int32_t reconsume_times;
    int64_t queue_offset;
    int64_t physical_offset;
    int64_t born_timestamp;
    int64_t store_timestamp;
    int64_t prepared_tx_offset;
    int v2;
} rmq_msg;

/* Store record `r` (at buffer position `pos`, `size` bytes) as column `n` of a (RMQ_NCOLUMNS, cap)
 * int64 array with row stride `rs` and column stride `cs` (in elements): the decode_batch layout. */
static inline void rmq_record_to_columns(int64_t *out, int64_t rs, int64_t cs, int64_t n, int64_t pos,
                                         int64_t size, const rmq_record *r) {
#define RMQ_COL(c) out[(int64_t)(c) * rs + n * cs]
    RMQ_COL(RMQ_C_POSITION) = pos;
    RMQ_COL(RMQ_C_SIZE) = size;
    RMQ_COL(RMQ_C_MAGIC) = r->magic;
    RMQ_COL(RMQ_C_BODY_CRC) = r->body_crc;
    RMQ_COL(RMQ_C_QUEUE_ID) = r->queue_id;
    RMQ_COL(RMQ_C_FLAG) = r->flag;
    RMQ_COL(RMQ_C_QUEUE_OFFSET) = r->queue_offset;
    RMQ_COL(RMQ_C_PHYSICAL_OFFSET) = r->physical_offset;
    RMQ_COL(RMQ_C_SYS_FLAG) = r->sys_flag;
    RMQ_COL(RMQ_C_BORN_TIMESTAMP) = r->born_timestamp;
    RMQ_COL(RMQ_C_BORN_HOST_POS) = r->born_host_pos;
    RMQ_COL(RMQ_C_BORN_PORT) = r->born_port;
    RMQ_COL(RMQ_C_STORE_TIMESTAMP) = r->store_timestamp;
    RMQ_COL(RMQ_C_STORE_HOST_POS) = r->store_host_pos;
    RMQ_COL(RMQ_C_STORE_PORT) = r->store_port;
    RMQ_COL(RMQ_C_RECONSUME_TIMES) = r->reconsume_times;
    RMQ_COL(RMQ_C_PREPARED_TX_OFFSET) = r->prepared_tx_offset;
    RMQ_COL(RMQ_C_BODY_POS) = r->body_pos;
    RMQ_COL(RMQ_C_BODY_LEN) = r->body_len;
    RMQ_COL(RMQ_C_TOPIC_POS) = r->topic_pos;
    RMQ_COL(RMQ_C_TOPIC_LEN) = r->topic_len;
    RMQ_COL(RMQ_C_PROPERTIES_POS) = r->props_pos;
    RMQ_COL(RMQ_C_PROPERTIES_LEN) = r->props_len;
#undef RMQ_COL
}

/* MessageExtEncoder.calMsgLength (body_len < 0 counts as 0). */
int64_t rmq_record_size(int64_t body_len, int64_t topic_len, int64_t props_len, int64_t sys_flag, int v2);

/* zlib CRC-32 of buf[0, len) & 0x7FFFFFFF (the stored BODYCRC). */
uint32_t rmq_body_crc(const unsigned char *buf, size_t len);

/* Write one record of `size` bytes (= rmq_record_size of m) at dst with the given BODYCRC (masked).
 * The caller validated every field and that dst has room; sources must not overlap dst. */
void rmq_encode_record(unsigned char *dst, const rmq_msg *m, int64_t size, uint32_t body_crc);

/* Same, with BODYCRC computed here over the body as written at dst (never disagrees with it). */
void rmq_encode_record_crc(unsigned char *dst, const rmq_msg *m, int64_t size);

/* Write n consecutive records at dst: record i takes body/props i, flag flags[i] (0 if flags is
 * NULL), queue offset m->queue_offset + i and physical offset m->physical_offset + bytes before it;
 * m's body/props/flag/queue_offset/physical_offset are ignored. sizes[i] must be its record size. */
void rmq_encode_batch(unsigned char *dst, const rmq_msg *m, int64_t n, const unsigned char *const *bodies,
                      const int64_t *body_lens, const unsigned char *const *props, const int64_t *props_lens,
                      const int32_t *flags, const int64_t *sizes);

/* Read one byte per 4 KiB page of buf[0, len) (fault mapped pages in without the GIL before a
 * large copy); the result is meaningless. */
uint32_t rmq_pretouch(const unsigned char *buf, size_t len);

/* The 8-byte BLANK filler: int remaining, int BLANK magic. */
void rmq_encode_blank(unsigned char *dst, int32_t remaining);

/* Classify what starts at pos from its first 8 bytes (peek_record); *size as the pure twin. */
int rmq_peek_record(const unsigned char *buf, int64_t pos, int64_t limit, int64_t *size);

/* Full validation (check_record). On RMQ_ST_MSG, rec (if not NULL) holds every field. */
int rmq_check_record(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t *size,
                     rmq_record *rec);

/* Walk valid records (scan_records): returns the status, sets end position, count and the
 * STORETIMESTAMP of the last valid record (-1 when none). max_records < 0: no limit. */
int rmq_scan_records(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t max_records,
                     int64_t *end_pos, int64_t *count, int64_t *last_store_ts);

/* Decode up to cap records into out: column c of record n goes to out[c * row_stride + n * col_stride]
 * (strides in int64 elements; a C-ordered (RMQ_NCOLUMNS, cap) array has row_stride cap, col_stride 1).
 * Returns ST_MSG when cap records were decoded, else the status that stopped the walk. */
int rmq_decode_batch(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t *out,
                     int64_t row_stride, int64_t col_stride, int64_t cap, int64_t *count, int64_t *end_pos);

#ifdef __cplusplus
}
#endif

#endif /* RMQ_CODEC_H */
