/*
 * rmq_codec.c - RocketMQ CommitLog record codec kernels. Contract in rmq_codec.h.
 *
 * Semantics mirror rmqcore/_pure/codec.py exactly (the reference twin): same statuses, same order
 * of checks (peek: end/blank/magic/size/torn; then field lengths and size recomputation; then CRC).
 * Positions are int64: with pos <= limit <= buffer length and every length field at most 2^31,
 * no position arithmetic below can overflow.
 */
#include "rmq_codec.h"

#include <string.h>

#include "rmq_crc32.h"
#include "rmq_endian.h"

int64_t rmq_record_size(int64_t body_len, int64_t topic_len, int64_t props_len, int64_t sys_flag, int v2)
{
    return RMQ_MIN_RECORD_SIZE + (body_len > 0 ? body_len : 0) + topic_len + props_len +
           ((sys_flag & RMQ_FLAG_BORNHOST_V6) ? 12 : 0) + ((sys_flag & RMQ_FLAG_STOREHOST_V6) ? 12 : 0) +
           (v2 ? 1 : 0);
}

uint32_t rmq_body_crc(const unsigned char *buf, size_t len)
{
    return rmq_crc32(0, buf, len) & 0x7FFFFFFFu;
}

/* ---------------------------------------------------------------------------------------------
 * encode
 * ------------------------------------------------------------------------------------------- */

static inline unsigned char *put_host(unsigned char *p, const unsigned char *addr, int32_t alen, int32_t port)
{
    if (alen == 4) /* (constant sizes: moves, not a library call per record) */
        memcpy(p, addr, 4);
    else if (alen == 16)
        memcpy(p, addr, 16);
    else
        memcpy(p, addr, (size_t)alen);
    p += alen;
    rmq_store_be32(p, (uint32_t)port);
    return p + 4;
}

/* One record; flag, queue offset, physical offset, body and properties come as arguments because
 * they vary within a batch. With own_crc, BODYCRC is computed over the copy just written (hot in cache), so that the stored CRC
 * always matches the stored body even if another thread scribbles over the source meanwhile;
 * otherwise body_crc is stored as given. */
static inline void encode_one(unsigned char *dst, const rmq_msg *m, int64_t size, int own_crc, uint32_t body_crc,
                              int32_t flag, int64_t queue_offset, int64_t physical_offset,
                              const unsigned char *body, int64_t body_len, const unsigned char *props,
                              int64_t props_len)
{
    unsigned char *p = dst;
    unsigned char *stored_body;
    rmq_store_be32(p + 0, (uint32_t)size);
    rmq_store_be32(p + 4, (uint32_t)(m->v2 ? RMQ_MAGIC_V2 : RMQ_MAGIC_V1));
    rmq_store_be32(p + 12, (uint32_t)m->queue_id);
    rmq_store_be32(p + 16, (uint32_t)flag);
    rmq_store_be64(p + 20, (uint64_t)queue_offset);
    rmq_store_be64(p + 28, (uint64_t)physical_offset);
    rmq_store_be32(p + 36, (uint32_t)m->sys_flag);
    rmq_store_be64(p + 40, (uint64_t)m->born_timestamp);
    p += 48;
    p = put_host(p, m->born_addr, m->born_addr_len, m->born_port);
    rmq_store_be64(p, (uint64_t)m->store_timestamp);
    p += 8;
    p = put_host(p, m->store_addr, m->store_addr_len, m->store_port);
    rmq_store_be32(p, (uint32_t)m->reconsume_times);
    rmq_store_be64(p + 4, (uint64_t)m->prepared_tx_offset);
    rmq_store_be32(p + 12, (uint32_t)body_len);
    p += 16;
    stored_body = p;
    if (body_len > 0) {
        memcpy(p, body, (size_t)body_len);
        p += body_len;
    }
    rmq_store_be32(dst + 8, own_crc ? rmq_body_crc(stored_body, body_len > 0 ? (size_t)body_len : 0) : body_crc);
    if (m->v2) {
        rmq_store_be16(p, (uint16_t)m->topic_len);
        p += 2;
    } else {
        *p++ = (unsigned char)m->topic_len;
    }
    memcpy(p, m->topic, (size_t)m->topic_len);
    p += m->topic_len;
    rmq_store_be16(p, (uint16_t)props_len);
    p += 2;
    if (props_len > 0)
        memcpy(p, props, (size_t)props_len);
}

void rmq_encode_record(unsigned char *dst, const rmq_msg *m, int64_t size, uint32_t body_crc)
{
    encode_one(dst, m, size, 0, body_crc, m->flag, m->queue_offset, m->physical_offset, m->body, m->body_len, m->props,
               m->props_len);
}

void rmq_encode_record_crc(unsigned char *dst, const rmq_msg *m, int64_t size)
{
    encode_one(dst, m, size, 1, 0, m->flag, m->queue_offset, m->physical_offset, m->body, m->body_len, m->props,
               m->props_len);
}

void rmq_encode_batch(unsigned char *dst, const rmq_msg *m, int64_t n, const unsigned char *const *bodies,
                      const int64_t *body_lens, const unsigned char *const *props, const int64_t *props_lens,
                      const int32_t *flags, const int64_t *sizes)
{
    int64_t i, off = 0;
    for (i = 0; i < n; i++) {
        encode_one(dst + off, m, sizes[i], 1, 0, flags ? flags[i] : 0, m->queue_offset + i, m->physical_offset + off,
                   bodies[i], body_lens[i], props[i], props_lens[i]);
        off += sizes[i];
    }
}

uint32_t rmq_pretouch(const unsigned char *buf, size_t len)
{
    /* one read per 4 KiB page, through a volatile pointer so that the loads are not elided */
    const volatile unsigned char *p = buf;
    uint32_t acc = 0;
    size_t i;
    for (i = 0; i < len; i += 4096)
        acc += p[i];
    if (len)
        acc += p[len - 1];
    return acc;
}

void rmq_encode_blank(unsigned char *dst, int32_t remaining)
{
    rmq_store_be32(dst, (uint32_t)remaining);
    rmq_store_be32(dst + 4, (uint32_t)RMQ_MAGIC_BLANK);
}

/* ---------------------------------------------------------------------------------------------
 * decode
 * ------------------------------------------------------------------------------------------- */

int rmq_peek_record(const unsigned char *buf, int64_t pos, int64_t limit, int64_t *size)
{
    int64_t remaining = limit - pos;
    int32_t sz, magic;
    *size = 0;
    if (remaining <= 0)
        return RMQ_ST_END;
    if (remaining < 8) {
        int64_t i;
        for (i = pos; i < limit; i++)
            if (buf[i])
                return RMQ_ST_TORN;
        return RMQ_ST_END;
    }
    sz = rmq_load_be32s(buf + pos);
    magic = rmq_load_be32s(buf + pos + 4);
    *size = sz;
    if (magic == RMQ_MAGIC_BLANK)
        return RMQ_ST_BLANK;
    if (sz == 0 && magic == 0)
        return RMQ_ST_END;
    if (magic != RMQ_MAGIC_V1 && magic != RMQ_MAGIC_V2)
        return RMQ_ST_BAD_MAGIC;
    if (sz < RMQ_MIN_RECORD_SIZE)
        return RMQ_ST_BAD_SIZE;
    if (sz > remaining)
        return RMQ_ST_TORN;
    return RMQ_ST_MSG;
}

/* Field lengths of a record whose header said MSG (size in [91, limit - pos]): 0 when they are
 * consistent with size, -1 otherwise. Mirrors the pure twin's _parse; each length field is read
 * only after proving it lies inside [pos, end). */
static int parse_record(const unsigned char *buf, int64_t pos, int64_t size, int32_t magic, rmq_record *r)
{
    const int64_t end = pos + size;
    const int v2 = magic == RMQ_MAGIC_V2;
    const int tl = v2 ? 2 : 1;
    int32_t sys_flag, body_len, topic_len, props_len;
    int64_t p, bh, sh;

    sys_flag = rmq_load_be32s(buf + pos + 36); /* 40 <= 91 <= size */
    bh = (sys_flag & RMQ_FLAG_BORNHOST_V6) ? 20 : 8;
    sh = (sys_flag & RMQ_FLAG_STOREHOST_V6) ? 20 : 8;
    p = pos + 48 + bh + 8 + sh + 4 + 8; /* BODYLENGTH */
    if (p + 4 > end)
        return -1;
    body_len = rmq_load_be32s(buf + p);
    r->body_pos = p + 4;
    r->body_len = body_len > 0 ? body_len : 0;
    p = r->body_pos + r->body_len;
    if (p + tl > end)
        return -1;
    topic_len = v2 ? (int32_t)rmq_load_be16s(buf + p) : (int32_t)(int8_t)buf[p];
    if (topic_len < 0)
        return -1;
    r->topic_pos = p + tl;
    r->topic_len = topic_len;
    p = r->topic_pos + topic_len;
    if (p + 2 > end)
        return -1;
    props_len = rmq_load_be16s(buf + p);
    r->props_pos = p + 2;
    r->props_len = props_len;
    if (props_len < 0 || r->props_pos + props_len > end)
        return -1;
    if (rmq_record_size(body_len, topic_len, props_len, sys_flag, v2) != size)
        return -1;
    r->sys_flag = sys_flag;
    r->born_addr_len = (int32_t)bh - 4;
    r->store_addr_len = (int32_t)sh - 4;
    r->born_host_pos = pos + 48;
    r->store_host_pos = pos + 48 + bh + 8;
    return 0;
}

/* The fixed-position fields of a parsed record (all inside it: the parse proved size >= their end). */
static void read_fields(const unsigned char *buf, rmq_record *r)
{
    const unsigned char *b = buf + r->pos;
    const unsigned char *h;
    r->magic = rmq_load_be32s(b + 4);
    r->body_crc = rmq_load_be32s(b + 8);
    r->queue_id = rmq_load_be32s(b + 12);
    r->flag = rmq_load_be32s(b + 16);
    r->queue_offset = rmq_load_be64s(b + 20);
    r->physical_offset = rmq_load_be64s(b + 28);
    r->born_timestamp = rmq_load_be64s(b + 40);
    h = buf + r->born_host_pos + r->born_addr_len;
    r->born_port = rmq_load_be32s(h);
    r->store_timestamp = rmq_load_be64s(h + 4);
    h = buf + r->store_host_pos + r->store_addr_len;
    r->store_port = rmq_load_be32s(h);
    r->reconsume_times = rmq_load_be32s(h + 4);
    r->prepared_tx_offset = rmq_load_be64s(h + 8);
}

/* check_record without decoding the fixed fields: r gets the positions and lengths only. */
static inline int check_core(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t *size,
                             rmq_record *r)
{
    int32_t magic;
    int status = rmq_peek_record(buf, pos, limit, size);
    if (status != RMQ_ST_MSG)
        return status;
    magic = rmq_load_be32s(buf + pos + 4);
    if (parse_record(buf, pos, *size, magic, r) != 0)
        return RMQ_ST_BAD_SIZE;
    r->pos = pos;
    r->size = *size;
    if (verify_crc) {
        uint32_t stored = rmq_load_be32(buf + pos + 8);
        if (rmq_body_crc(buf + r->body_pos, (size_t)r->body_len) != stored)
            return RMQ_ST_BAD_CRC;
    }
    return RMQ_ST_MSG;
}

int rmq_check_record(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t *size,
                     rmq_record *rec)
{
    rmq_record tmp;
    int status = check_core(buf, pos, limit, verify_crc, size, rec ? rec : &tmp);
    if (status == RMQ_ST_MSG && rec)
        read_fields(buf, rec);
    return status;
}

int rmq_scan_records(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t max_records,
                     int64_t *end_pos, int64_t *count, int64_t *last_store_ts)
{
    rmq_record r;
    int64_t n = 0, size, last_ts = -1;
    int status = RMQ_ST_MSG;
    while (max_records < 0 || n < max_records) {
        status = check_core(buf, pos, limit, verify_crc, &size, &r);
        if (status != RMQ_ST_MSG)
            break;
        /* STORETIMESTAMP follows the born host: inside the record (size >= 91 + 12 when born v6) */
        last_ts = rmq_load_be64s(buf + r.born_host_pos + r.born_addr_len + 4);
        pos += size;
        n++;
    }
    *end_pos = pos;
    *count = n;
    *last_store_ts = last_ts;
    return status;
}

int rmq_decode_batch(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t *out,
                     int64_t row_stride, int64_t col_stride, int64_t cap, int64_t *count, int64_t *end_pos)
{
    rmq_record r;
    int64_t n = 0, size;
    int status = RMQ_ST_MSG;
    while (n < cap) {
        status = rmq_check_record(buf, pos, limit, verify_crc, &size, &r);
        if (status != RMQ_ST_MSG)
            break;
        rmq_record_to_columns(out, row_stride, col_stride, n, pos, size, &r);
        n++;
        pos += size;
    }
    *count = n;
    *end_pos = pos;
    return status;
}
