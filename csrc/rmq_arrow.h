/*
 * rmq_arrow.h - Arrow column builders over decoded CommitLog records (plain C99, no Python.h).
 *
 * The native half of rmqcore._native.arrowcols (reference twin: rmqcore/_pure/arrowcols.py). Each
 * function turns record fields located by rmq_decode_batch's columns (positions and lengths inside
 * one buffer) into Arrow variable-size layouts: int32 offsets (n + 1 of them, the first 0) and the
 * concatenated values. Strings are UTF-8 as Python's bytes.decode("utf-8", "replace") makes them:
 * valid input is copied as is, each maximal invalid subpart becomes U+FFFD (EF BF BD).
 *
 * Safety contract: the caller has checked, once, that every (pos[i], len[i]) range (or the host
 * address at pos[i]: 4 bytes, 16 when the sys_flag bit says IPv6) lies inside data, and has sized
 * every output (from rmq_gather_utf8_size, the fixed per-row maxima below, or the worst cases given
 * at rmq_props_fill) and checked that the offsets fit int32. Nothing here allocates, and nothing
 * outside those ranges is read or written.
 */
#ifndef RMQ_ARROW_H
#define RMQ_ARROW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* longest "ip:port" ("ffff:...:ffff:-2147483648") and message id (16 + 4 + 8 bytes in hex) */
#define RMQ_HOST_MAX 52
#define RMQ_MSGID_MAX 56

/* bytes of s[0, n) after U+FFFD replacement; copy it to dst (that many bytes) */
int64_t rmq_utf8_out_len(const unsigned char *s, int64_t n);
int64_t rmq_utf8_copy(unsigned char *dst, const unsigned char *s, int64_t n);

/* out = concatenation of data[pos[i], pos[i] + len[i]) (raw bytes) */
void rmq_gather(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n, int32_t *offsets,
                unsigned char *out);

/* 1 when every data[pos[i], pos[i] + len[i]) is ASCII */
int rmq_ranges_ascii(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n);

/* the same with U+FFFD replacement; size first */
int64_t rmq_gather_utf8_size(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n);
void rmq_gather_utf8(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n,
                     int32_t *offsets, unsigned char *out);

/* "a.b.c.d:port" / Java's uncompressed IPv6 "x:x:x:x:x:x:x:x:port" of the address at pos[i]
 * (16 bytes when sys_flag[i] & v6_bit, else 4); out holds n * RMQ_HOST_MAX; returns bytes used */
int64_t rmq_format_hosts(const unsigned char *data, const int64_t *pos, const int64_t *port, const int64_t *sys_flag,
                         int64_t v6_bit, int64_t n, int32_t *offsets, unsigned char *out);

/* MessageDecoder.createMessageId: upper-case hex of address, port (int32) and offset (int64),
 * all big-endian; out holds n * RMQ_MSGID_MAX; returns bytes used */
int64_t rmq_message_ids(const unsigned char *data, const int64_t *pos, const int64_t *port, const int64_t *sys_flag,
                        int64_t v6_bit, const int64_t *offset, int64_t n, int32_t *offsets, unsigned char *out);

/*
 * Properties (MessageDecoder.string2messageProperties as rmqcore.message.parse_properties does it on
 * the replaced string): segments split on 0x02, a segment counts when its first 0x01 has a
 * non-empty name before it and a non-empty value after it; a repeated name keeps its first place
 * and takes the last value (a Python dict). TAGS is that map's "TAGS" value (null without), the
 * keys are its "KEYS" value split on ' ' with empty tokens dropped.
 *
 * scratch: 4 * (max_i len[i] / 2 + 2) int64 (the entries of one record). Names are compared with
 * the record's earlier names (quadratic in the entries of one record: fine for real properties, at
 * most ~8k entries in a 32 KiB string).
 */
typedef struct {
    int64_t entries, key_bytes, value_bytes, tag_bytes, tokens, token_bytes;
} rmq_props_sizes;

typedef struct {
    int32_t *map_offsets;   /* n + 1 */
    int32_t *key_offsets;   /* entries + 1 */
    unsigned char *key_data;
    int32_t *value_offsets; /* entries + 1 */
    unsigned char *value_data;
    int32_t *tag_offsets;   /* n + 1 */
    unsigned char *tag_data;
    unsigned char *tag_valid; /* n: 1 when the record has TAGS */
    int32_t *keys_offsets;  /* n + 1, into the tokens */
    int32_t *token_offsets; /* tokens + 1 */
    unsigned char *token_data;
} rmq_props_out;

/* fills out (sized for the worst case: each data buffer 3 * sum(len) bytes -- sum(len) when every
 * string is ASCII, which all_ascii = 1 asserts --, entries and tokens sum(len) / 2 + n) and returns
 * the sizes used in *sz */
void rmq_props_fill(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n, int all_ascii,
                    int64_t *scratch, rmq_props_out *out, rmq_props_sizes *sz);

#ifdef __cplusplus
}
#endif

#endif /* RMQ_ARROW_H */
