/*
 * rmq_dispatch.c - the dispatch kernel, see rmq_dispatch.h. Reference twin: rmqcore/_pure/dispatch.py.
 *
 * The record walk is rmq_check_record's. Per record, the properties are cut at every 0x02 in one
 * pass (16 bytes per step with SSE2, else 8 with SIMD-within-a-register; the same pass tells
 * whether they are ASCII), and only three names are looked at: a segment names TAGS/KEYS/UNIQ_KEY
 * exactly when it starts with "NAME\x01" (the name ends at the first 0x01), and it counts when a
 * value follows. ASCII bytes are their own UTF-16 units, so the common all-ASCII case hashes bytes
 * directly (eight per step of the Java hash chain); anything else goes through the UTF-8 decoder
 * below. Facts about the topic (its hash + "#", flags) are kept while consecutive records share it.
 *
 * Typical cost (x86-64, ~200-byte records with 3 keys and TAGS): ~65 ns per record in cache, of
 * which ~23 ns is rmq_check_record; see bench/bench_dispatch.py.
 */
#include "rmq_dispatch.h"

#include <string.h>

#include "rmq_endian.h"
#include "rmq_hash.h"
#include "rmq_hints.h"
#include "rmq_jhash.h"
#include "rmq_utf8.h"

#if !defined(RMQ_DISPATCH_NO_SIMD) && \
    (defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2))
#include <emmintrin.h>
#define RMQ_DISPATCH_SSE2 1
#else
#define RMQ_DISPATCH_SSE2 0
#endif

#define SCHEDULE_TOPIC_LEN (sizeof(RMQ_SCHEDULE_TOPIC) - 1)
#define HIGH_BITS 0x8080808080808080ull
#define LOW7_BITS 0x7F7F7F7F7F7F7F7Full

/* h = 31 h + unit, the Java step (unsigned: wrap-around without undefined behaviour) */
#define STEP(h, u) ((h) * 31u + (uint32_t)(u))

uint32_t rmq_java_hash_utf8(uint32_t h, const unsigned char *s, size_t n, int *bad)
{
    size_t i = 0;
    while (i < n) {
        uint32_t cp;
        if (s[i] < 0x80u) {
            h = STEP(h, s[i]);
            i++;
            continue;
        }
        int valid;
        i += rmq_utf8_seq(s + i, n - i, &cp, &valid);
        if (!valid)
            *bad = 1;
        if (cp > 0xFFFFu) {
            cp -= 0x10000u;
            h = STEP(h, 0xD800u + (cp >> 10));
            h = STEP(h, 0xDC00u + (cp & 0x3FFu));
        } else {
            h = STEP(h, cp);
        }
    }
    return h;
}

int rmq_utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    int valid = 1;
    while (i < n && valid) {
        uint32_t cp;
        if (s[i] < 0x80u)
            i++;
        else
            i += rmq_utf8_seq(s + i, n - i, &cp, &valid);
    }
    return valid;
}

/* bit 8k+7 set exactly where byte k of w equals the byte repeated in rep (no carries between bytes) */
static inline uint64_t swar_eq(uint64_t w, uint64_t rep)
{
    const uint64_t x = w ^ rep;
    return ~(((x & LOW7_BITS) + LOW7_BITS) | x) & HIGH_BITS;
}

/* the first n < 8 bytes of p in a word, zero-padded (a zero byte is never a separator looked for) */
static inline uint64_t load_short(const unsigned char *p, size_t n)
{
    uint64_t w = 0;
    size_t k;
    for (k = 0; k < n; k++)
        w |= (uint64_t)p[k] << (8 * k);
    return w;
}

/* Iterator over the positions of one byte value c != 0 in p[0, n), one block (16 bytes with SSE2,
 * else 8) per step; `m` has bit k set when byte base + k matches (SWAR: bit 8k + 7). After the last
 * full block it re-reads the last block-size bytes, masking those already seen; shorter strings
 * are read in 8-byte pieces or byte by byte: nothing outside p[0, n) is read. `hi` is nonzero once
 * a byte >= 0x80 was seen (so 0 at the end means the string is ASCII). */
typedef struct sep_iter {
    const unsigned char *p;
    size_t n, next, base;
    uint64_t m, rep64;
    unsigned hi;
#if RMQ_DISPATCH_SSE2
    __m128i rep;
#endif
} sep_iter;

#if RMQ_DISPATCH_SSE2
#define BLOCK 16

static inline uint64_t block_mask(sep_iter *it, const unsigned char *q)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
    it->hi |= (unsigned)_mm_movemask_epi8(v);
    return (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, it->rep));
}

/* swar_eq's bits 8k+7 gathered into bits k (the multiplier puts bit 8k at bit 56 + k, no carries) */
static inline uint64_t compress8(uint64_t m)
{
    return ((m >> 7) * 0x0102040810204080ull) >> 56;
}

/* a string shorter than one block: bit k for byte k */
static inline uint64_t short_mask(sep_iter *it)
{
    const unsigned char *p = it->p;
    const size_t n = it->n;
    uint64_t w0, w1;
    if (n >= 8) { /* two overlapping words; a byte seen twice gives the same bit */
        w0 = rmq_load_le64(p);
        w1 = rmq_load_le64(p + n - 8);
        it->hi |= ((w0 | w1) & HIGH_BITS) != 0;
        return compress8(swar_eq(w0, it->rep64)) | compress8(swar_eq(w1, it->rep64)) << (n - 8);
    }
    w0 = load_short(p, n);
    it->hi |= (w0 & HIGH_BITS) != 0;
    return compress8(swar_eq(w0, it->rep64));
}

static inline unsigned mask_index(uint64_t m)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(m);
#else
    unsigned k = 0;
    while (!(m & 1u)) {
        m >>= 1;
        k++;
    }
    return k;
#endif
}

#define MASK_FROM(from) (~(uint64_t)0 << (from)) /* bits of bytes [from, BLOCK) */
#else
#define BLOCK 8

static inline uint64_t block_mask(sep_iter *it, const unsigned char *q)
{
    const uint64_t w = rmq_load_le64(q);
    it->hi |= (w & HIGH_BITS) != 0;
    return swar_eq(w, it->rep64);
}

static inline uint64_t short_mask(sep_iter *it)
{
    const uint64_t w = load_short(it->p, it->n);
    it->hi |= (w & HIGH_BITS) != 0;
    return swar_eq(w, it->rep64);
}

static inline unsigned mask_index(uint64_t m)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(m) >> 3;
#else
    unsigned k = 0;
    while (!(m & 0x80u)) {
        m >>= 8;
        k++;
    }
    return k;
#endif
}

#define MASK_FROM(from) (~(uint64_t)0 << (8 * (from)))
#endif

static inline void sep_init(sep_iter *it, const unsigned char *p, size_t n, unsigned char c)
{
    it->p = p;
    it->n = n;
    it->next = 0;
    it->base = 0;
    it->m = 0;
    it->hi = 0;
    it->rep64 = 0x0101010101010101ull * c;
#if RMQ_DISPATCH_SSE2
    it->rep = _mm_set1_epi8((char)c);
#endif
}

/* position of the next occurrence, or n when there is none left */
static inline size_t sep_next(sep_iter *it)
{
    while (it->m == 0) {
        const size_t i = it->next, n = it->n;
        if (i >= n)
            return n;
        if (i + BLOCK <= n) {
            it->base = i;
            it->m = block_mask(it, it->p + i);
            it->next = i + BLOCK;
        } else if (n >= BLOCK) { /* last partial block: bytes [n - BLOCK, i) were seen already */
            it->base = n - BLOCK;
            it->m = block_mask(it, it->p + n - BLOCK) & MASK_FROM(BLOCK - (n - i));
            it->next = n;
        } else { /* the whole string is shorter than a block (i == 0) */
            it->base = 0;
            it->m = short_mask(it);
            it->next = n;
        }
    }
    {
        const size_t k = it->base + mask_index(it->m);
        it->m &= it->m - 1;
        return k;
    }
}

/* 1 when every byte of s[0, n) is below 0x80 */
static inline int all_ascii(const unsigned char *s, size_t n)
{
    uint64_t acc = 0;
    unsigned tail = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        acc |= rmq_load_le64(s + i);
    for (; i < n; i++)
        tail |= s[i];
    return ((acc & HIGH_BITS) | (tail & 0x80u)) == 0;
}

#define hash_ascii rmq_jhash_ascii /* rmq_jhash.h */

uint32_t rmq_java_hash_ascii(uint32_t h, const unsigned char *s, size_t n)
{
    return hash_ascii(h, s, n);
}

static inline uint32_t hash_text(uint32_t h, const unsigned char *s, size_t n, int ascii)
{
    int ignored = 0;
    return ascii ? hash_ascii(h, s, n) : rmq_java_hash_utf8(h, s, n, &ignored);
}

static inline int64_t index_hash(uint32_t h)
{
    return rmq_index_key_hash(rmq_hash_as_int32(h));
}

/* a[0, an) == b[0, bn), inline: topics are short, and a libc call costs more than the compare */
static inline int same_bytes(const unsigned char *a, const unsigned char *b, size_t an, size_t bn)
{
    size_t i;
    if (an != bn)
        return 0;
    if (an >= 8) {
        for (i = 0; i + 8 <= an; i += 8)
            if (rmq_load_le64(a + i) != rmq_load_le64(b + i))
                return 0;
        return rmq_load_le64(a + an - 8) == rmq_load_le64(b + an - 8);
    }
    for (i = 0; i < an; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* the dispatch-relevant properties of one record */
typedef struct props_view {
    const unsigned char *tags, *keys, *uniq;
    size_t tags_len, keys_len, uniq_len;
} props_view;

/* One segment (between 0x02 separators): its name ends at its first 0x01, so it names TAGS exactly
 * when it starts with "TAGS\x01", and it counts when the value after that is non-empty. */
static inline void segment(const unsigned char *p, size_t len, props_view *v)
{
    if (len > 5 && p[4] == 0x01) {
        if (memcmp(p, "TAGS", 4) == 0) {
            v->tags = p + 5;
            v->tags_len = len - 5;
        } else if (memcmp(p, "KEYS", 4) == 0) {
            v->keys = p + 5;
            v->keys_len = len - 5;
        }
    } else if (len > 9 && p[8] == 0x01 && memcmp(p, "UNIQ_KEY", 8) == 0) {
        v->uniq = p + 9;
        v->uniq_len = len - 9;
    }
}

/* Cut p[0, n) at every 0x02 and look at each segment. Returns 1 when all of p[0, n) is ASCII. */
static inline int parse_props(const unsigned char *p, size_t n, props_view *v)
{
    sep_iter it;
    size_t seg = 0;
    v->tags = v->keys = v->uniq = NULL;
    v->tags_len = v->keys_len = v->uniq_len = 0;
    sep_init(&it, p, n, 0x02);
    for (;;) {
        size_t j = sep_next(&it);
        segment(p + seg, j - seg, v);
        if (j == n)
            break;
        seg = j + 1;
    }
    return it.hi == 0;
}

#define MAX_TOKENS 16 /* KEYS tokens remembered by the counting pass (more: split again) */

typedef struct tokens {
    int64_t count;
    uint32_t start[MAX_TOKENS];
    uint32_t len[MAX_TOKENS];
} tokens;

/* the non-empty tokens of s[0, n) split on ' ': count, and the first MAX_TOKENS of them */
static inline void split_keys(const unsigned char *s, size_t n, tokens *t)
{
    sep_iter it;
    size_t start = 0;
    t->count = 0;
    sep_init(&it, s, n, ' ');
    for (;;) {
        size_t j = sep_next(&it);
        if (j > start) {
            if (t->count < MAX_TOKENS) {
                t->start[t->count] = (uint32_t)start;
                t->len[t->count] = (uint32_t)(j - start);
            }
            t->count++;
        }
        if (j == n)
            break;
        start = j + 1;
    }
}

int rmq_dispatch_batch(const unsigned char *buf, int64_t pos, int64_t limit, int verify_crc, int64_t cap,
                       int64_t *cols, int64_t cols_rs, int64_t cols_cs, int64_t *disp, int64_t disp_rs,
                       int64_t disp_cs, int64_t *keys, int64_t keys_stride, int64_t keys_cap, int64_t *count,
                       int64_t *end_pos, int64_t *nkeys)
{
    rmq_record r;
    int64_t n = 0, nk = 0, size, t_flags = 0;
    const unsigned char *t_ptr = NULL;
    size_t t_len = 0;
    uint32_t t_hash = 0;
    int status = RMQ_ST_MSG;
    while (n < cap) {
        const unsigned char *topic, *props;
        size_t topic_len, props_len;
        props_view pv;
        tokens tk;
        int64_t rec_keys, flags, tags_code = 0;
        int props_ascii;

        status = rmq_check_record(buf, pos, limit, verify_crc, &size, &r);
        if (status != RMQ_ST_MSG)
            break;
        topic = buf + r.topic_pos;
        topic_len = (size_t)r.topic_len;
        props = buf + r.props_pos;
        props_len = (size_t)r.props_len;

        props_ascii = parse_props(props, props_len, &pv);
        tk.count = 0;
        if (pv.keys)
            split_keys(pv.keys, pv.keys_len, &tk);
        rec_keys = (pv.uniq ? 1 : 0) + tk.count;
        if (nk + rec_keys > keys_cap) {
            if (n == 0) {
                *count = 0;
                *end_pos = pos;
                *nkeys = rec_keys;
                return RMQ_DISPATCH_E_KEYS;
            }
            status = RMQ_ST_MSG;
            break;
        }

        /* topic facts, recomputed only when the topic differs from the previous record's */
        if (t_ptr == NULL || !same_bytes(topic, t_ptr, topic_len, t_len)) {
            int ascii = all_ascii(topic, topic_len);
            t_ptr = topic;
            t_len = topic_len;
            t_flags = 0;
            if (topic_len == SCHEDULE_TOPIC_LEN && memcmp(topic, RMQ_SCHEDULE_TOPIC, SCHEDULE_TOPIC_LEN) == 0)
                t_flags |= RMQ_DF_SCHEDULE;
            if (!ascii && !rmq_utf8_valid(topic, topic_len))
                t_flags |= RMQ_DF_BAD_UTF8;
            t_hash = STEP(hash_text(0, topic, topic_len, ascii), '#'); /* hash(topic + "#") */
        }
        flags = t_flags;
        if (!props_ascii && !rmq_utf8_valid(props, props_len))
            flags |= RMQ_DF_BAD_UTF8;
        if (pv.tags)
            tags_code = rmq_hash_as_int32(hash_text(0, pv.tags, pv.tags_len, props_ascii));

        if (rec_keys) { /* hash(topic + "#"), continued over each key */
            int64_t k = nk;
            if (pv.uniq)
                keys[(k++) * keys_stride] = index_hash(hash_text(t_hash, pv.uniq, pv.uniq_len, props_ascii));
            if (tk.count <= MAX_TOKENS) {
                int64_t i;
                for (i = 0; i < tk.count; i++)
                    keys[(k++) * keys_stride] =
                        index_hash(hash_text(t_hash, pv.keys + tk.start[i], tk.len[i], props_ascii));
            } else { /* many tokens: split again */
                const unsigned char *s = pv.keys, *e = pv.keys + pv.keys_len;
                while (s < e) {
                    const unsigned char *t;
                    if (*s == ' ') {
                        s++;
                        continue;
                    }
                    t = s;
                    while (s < e && *s != ' ')
                        s++;
                    keys[(k++) * keys_stride] = index_hash(hash_text(t_hash, t, (size_t)(s - t), props_ascii));
                }
            }
        }

        rmq_record_to_columns(cols, cols_rs, cols_cs, n, pos, size, &r);
#define DSP(c) disp[(int64_t)(c) * disp_rs + n * disp_cs]
        DSP(RMQ_D_TAGS_CODE) = tags_code;
        DSP(RMQ_D_FLAGS) = flags;
        DSP(RMQ_D_KEYS_START) = nk;
        DSP(RMQ_D_KEYS_COUNT) = rec_keys;
#undef DSP
        nk += rec_keys;
        n++;
        pos += size;
    }
    *count = n;
    *end_pos = pos;
    *nkeys = nk;
    return status;
}

int64_t rmq_dispatch_hinted(const int64_t *ring, int64_t head, int64_t *ri, const unsigned char *buf,
                            int64_t file_from, int64_t pos, int64_t limit, int64_t cap, int64_t *cols,
                            int64_t cols_rs, int64_t *disp, int64_t disp_rs, int64_t *keys, int64_t *end_pos,
                            int64_t *nkeys, int64_t *next_hint, int64_t *first)
{
    int64_t n = 0, nk = 0, r = *ri, f = -1;
    *next_hint = -1;
    if (head - r > RMQ_HINT_CAPACITY) /* overwritten since: the oldest hint still there */
        r = head - RMQ_HINT_CAPACITY;
    while (n < cap && r < head) {
        const int64_t *e = ring + (r & (RMQ_HINT_CAPACITY - 1)) * RMQ_HINT_FIELDS;
        const int64_t s1 = __atomic_load_n(&e[RMQ_H_SEQ], __ATOMIC_ACQUIRE);
        int64_t phys, sz, q, qoff, ts, tags, key, size, nkr, tlen, qid, trel, at;
        const unsigned char *p;
        uint32_t magic;
        if (s1 != r) {
            /* -1: invalidated (skip it); newer: hints r .. s1 - capacity were overwritten (r only
             * moves forward, whatever the ring holds) */
            r = s1 - RMQ_HINT_CAPACITY + 1 > r ? s1 - RMQ_HINT_CAPACITY + 1 : r + 1;
            continue;
        }
        phys = __atomic_load_n(&e[RMQ_H_PHYS], __ATOMIC_RELAXED);
        sz = __atomic_load_n(&e[RMQ_H_SIZE], __ATOMIC_RELAXED);
        q = __atomic_load_n(&e[RMQ_H_QUEUE], __ATOMIC_RELAXED);
        qoff = __atomic_load_n(&e[RMQ_H_QOFF], __ATOMIC_RELAXED);
        ts = __atomic_load_n(&e[RMQ_H_TS], __ATOMIC_RELAXED);
        tags = __atomic_load_n(&e[RMQ_H_TAGS], __ATOMIC_RELAXED);
        key = __atomic_load_n(&e[RMQ_H_KEY], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&e[RMQ_H_SEQ], __ATOMIC_RELAXED) != s1)
            break; /* overwritten while read: this reader is a ring behind, parse */
        at = file_from + pos;
        if (phys < at) { /* a record dispatched already */
            r++;
            continue;
        }
        if (phys > at) { /* the record at pos has no hint */
            *next_hint = phys;
            break;
        }
        size = sz & 0xFFFFFFFF;
        nkr = (sz >> 32) & 0xFF;
        tlen = (sz >> 40) & 0xFFFF;
        qid = q & 0xFFFFFFFF;
        trel = (int64_t)((uint64_t)q >> 32);
        if (size < RMQ_MIN_RECORD_SIZE || size > limit - pos || trel + tlen > size || nkr > 1) {
            *next_hint = at; /* not a hint this reader can use: parse this one record */
            break;
        }
        p = buf + pos;
        magic = rmq_load_be32(p + 4);
        if (rmq_load_be32s(p) != size || (magic != 0xDAA320A7u && magic != 0xDAA320ABu) ||
            rmq_load_be32s(p + 12) != qid || rmq_load_be64s(p + 20) != qoff || rmq_load_be64s(p + 28) != phys ||
            (rmq_load_be32s(p + 36) & 0xC) != 0) {
            *next_hint = at; /* not the record this hint describes: parse this one record */
            break;
        }
#define COL(c) cols[(int64_t)(c) * cols_rs + n]
#define DSP(c) disp[(int64_t)(c) * disp_rs + n]
        COL(RMQ_C_POSITION) = pos;
        COL(RMQ_C_SIZE) = size;
        COL(RMQ_C_SYS_FLAG) = rmq_load_be32s(p + 36);
        COL(RMQ_C_QUEUE_ID) = qid;
        COL(RMQ_C_QUEUE_OFFSET) = qoff;
        COL(RMQ_C_STORE_TIMESTAMP) = ts;
        COL(RMQ_C_TOPIC_POS) = pos + trel;
        COL(RMQ_C_TOPIC_LEN) = tlen;
        DSP(RMQ_D_TAGS_CODE) = tags;
        DSP(RMQ_D_FLAGS) = 0;
        DSP(RMQ_D_KEYS_START) = nk;
        DSP(RMQ_D_KEYS_COUNT) = nkr;
#undef COL
#undef DSP
        if (nkr)
            keys[nk++] = key;
        if (n == 0)
            f = r;
        n++;
        pos += size;
        r++;
    }
    *first = f >= 0 ? f : r;
    *ri = r;
    *end_pos = pos;
    *nkeys = nk;
    return n;
}
