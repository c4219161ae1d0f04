/*
 * rmq_arrow.c - Arrow column builders, see rmq_arrow.h. Reference twin: rmqcore/_pure/arrowcols.py.
 *
 * All-ASCII text (the usual case) is recognised eight bytes at a time and copied with memcpy; only
 * text with a byte >= 0x80 goes through the sequence decoder (CPython's rule: maximal invalid
 * subparts become one U+FFFD each, surrogates and overlongs are invalid).
 */
#include "rmq_arrow.h"

#include <string.h>

#include "rmq_endian.h"
#include "rmq_utf8.h"

#define HIGH_BITS 0x8080808080808080ull
#define LOW3_BITS 0x0303030303030303ull

static int is_ascii(const unsigned char *s, int64_t n)
{
    int64_t i = 0;
    uint64_t acc = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, s + i, 8);
        acc |= v;
    }
    for (; i < n; i++)
        acc |= s[i];
    return (acc & HIGH_BITS) == 0;
}

/* d[0, n) = s[0, n) for short strings without a library call (no byte outside either range is touched) */
static inline void copy_short(unsigned char *d, const unsigned char *s, int64_t n)
{
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n < 4) {
        int64_t i;
        for (i = 0; i < n; i++)
            d[i] = s[i];
    } else {
        memcpy(d, s, (size_t)n);
    }
}

int64_t rmq_utf8_out_len(const unsigned char *s, int64_t n)
{
    int64_t i = 0, out = 0;
    if (is_ascii(s, n))
        return n;
    while (i < n) {
        uint32_t cp;
        int ok;
        int64_t k;
        if (s[i] < 0x80u) {
            i++;
            out++;
            continue;
        }
        k = (int64_t)rmq_utf8_seq(s + i, (size_t)(n - i), &cp, &ok);
        out += ok ? k : 3;
        i += k;
    }
    return out;
}

int64_t rmq_utf8_copy(unsigned char *dst, const unsigned char *s, int64_t n)
{
    int64_t i = 0;
    unsigned char *d = dst;
    if (n > 0 && is_ascii(s, n)) {
        memcpy(dst, s, (size_t)n);
        return n;
    }
    while (i < n) {
        uint32_t cp;
        int ok;
        int64_t k;
        if (s[i] < 0x80u) {
            *d++ = s[i++];
            continue;
        }
        k = (int64_t)rmq_utf8_seq(s + i, (size_t)(n - i), &cp, &ok);
        if (ok) {
            memcpy(d, s + i, (size_t)k);
            d += k;
        } else {
            d[0] = 0xEF;
            d[1] = 0xBF;
            d[2] = 0xBD;
            d += 3;
        }
        i += k;
    }
    return d - dst;
}

/* code point at s[*i] (advancing *i), U+FFFD for an invalid subpart */
static inline uint32_t next_cp(const unsigned char *s, int64_t n, int64_t *i)
{
    uint32_t cp;
    int ok;
    if (s[*i] < 0x80u)
        return s[(*i)++];
    *i += (int64_t)rmq_utf8_seq(s + *i, (size_t)(n - *i), &cp, &ok);
    return cp;
}

/* a and b equal after replacement */
static int utf8_eq(const unsigned char *a, int64_t na, const unsigned char *b, int64_t nb)
{
    int64_t i = 0, j = 0;
    if (na == nb && memcmp(a, b, (size_t)na) == 0)
        return 1;
    while (i < na && j < nb)
        if (next_cp(a, na, &i) != next_cp(b, nb, &j))
            return 0;
    return i == na && j == nb;
}

void rmq_gather(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n, int32_t *offsets,
                unsigned char *out)
{
    int64_t i, o = 0;
    offsets[0] = 0;
    for (i = 0; i < n; i++) {
        copy_short(out + o, data + pos[i], len[i]);
        o += len[i];
        offsets[i + 1] = (int32_t)o;
    }
}

int rmq_ranges_ascii(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n)
{
    int64_t i;
    for (i = 0; i < n; i++)
        if (!is_ascii(data + pos[i], len[i]))
            return 0;
    return 1;
}

int64_t rmq_gather_utf8_size(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n)
{
    int64_t i, o = 0;
    for (i = 0; i < n; i++)
        o += rmq_utf8_out_len(data + pos[i], len[i]);
    return o;
}

void rmq_gather_utf8(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n,
                     int32_t *offsets, unsigned char *out)
{
    int64_t i, o = 0;
    offsets[0] = 0;
    for (i = 0; i < n; i++) {
        o += rmq_utf8_copy(out + o, data + pos[i], len[i]);
        offsets[i + 1] = (int32_t)o;
    }
}

/* the k-byte (4 or 16) addresses at a and b are equal (fixed-size compares, no library call) */
static inline int same_addr(const unsigned char *a, const unsigned char *b, int k)
{
    if (k == 4) {
        uint32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        return x == y;
    } else {
        uint64_t x0, x1, y0, y1;
        memcpy(&x0, a, 8);
        memcpy(&x1, a + 8, 8);
        memcpy(&y0, b, 8);
        memcpy(&y1, b + 8, 8);
        return x0 == y0 && x1 == y1;
    }
}

/* decimal of v at d; returns the bytes written */
static int put_dec(unsigned char *d, int64_t v)
{
    unsigned char tmp[24];
    int k = 0, w = 0;
    uint64_t u;
    if (v < 0) {
        d[w++] = '-';
        u = (uint64_t)0 - (uint64_t)v;
    } else {
        u = (uint64_t)v;
    }
    do {
        tmp[k++] = (unsigned char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (k)
        d[w++] = tmp[--k];
    return w;
}

static const char HEX_LO[] = "0123456789abcdef";
/* HEX_PAIRS[2 b], HEX_PAIRS[2 b + 1]: upper-case hex of byte b */
static const char HEX_PAIRS[] =
    "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F"
    "202122232425262728292A2B2C2D2E2F303132333435363738393A3B3C3D3E3F"
    "404142434445464748494A4B4C4D4E4F505152535455565758595A5B5C5D5E5F"
    "606162636465666768696A6B6C6D6E6F707172737475767778797A7B7C7D7E7F"
    "808182838485868788898A8B8C8D8E8F909192939495969798999A9B9C9D9E9F"
    "A0A1A2A3A4A5A6A7A8A9AAABACADAEAFB0B1B2B3B4B5B6B7B8B9BABBBCBDBEBF"
    "C0C1C2C3C4C5C6C7C8C9CACBCCCDCECFD0D1D2D3D4D5D6D7D8D9DADBDCDDDEDF"
    "E0E1E2E3E4E5E6E7E8E9EAEBECEDEEEFF0F1F2F3F4F5F6F7F8F9FAFBFCFDFEFF";
static const char HEX_UP[] = "0123456789ABCDEF";

int64_t rmq_format_hosts(const unsigned char *data, const int64_t *pos, const int64_t *port, const int64_t *sys_flag,
                         int64_t v6_bit, int64_t n, int32_t *offsets, unsigned char *out)
{
    int64_t i, o = 0, prev_o = 0, prev_w = -1;
    const unsigned char *prev_a = NULL;
    int prev_k = 0;
    offsets[0] = 0;
    for (i = 0; i < n; i++) {
        const unsigned char *a = data + pos[i];
        unsigned char *d = out + o;
        int w = 0, j, k = (sys_flag[i] & v6_bit) ? 16 : 4;
        /* consecutive records mostly come from one host: repeat the last string */
        if (prev_w >= 0 && k == prev_k && port[i] == port[i - 1] && same_addr(a, prev_a, k)) {
            memcpy(d, out + prev_o, (size_t)prev_w);
            o += prev_w;
            offsets[i + 1] = (int32_t)o;
            continue;
        }
        if (k == 16) {
            for (j = 0; j < 8; j++) {
                unsigned v = ((unsigned)a[2 * j] << 8) | a[2 * j + 1];
                int started = 0, sh;
                if (j)
                    d[w++] = ':';
                for (sh = 12; sh >= 0; sh -= 4) {
                    unsigned nib = (v >> sh) & 0xFu;
                    if (nib || started || sh == 0) {
                        d[w++] = (unsigned char)HEX_LO[nib];
                        started = 1;
                    }
                }
            }
        } else {
            for (j = 0; j < 4; j++) {
                if (j)
                    d[w++] = '.';
                w += put_dec(d + w, a[j]);
            }
        }
        d[w++] = ':';
        w += put_dec(d + w, port[i]);
        prev_o = o;
        prev_w = w;
        prev_a = a;
        prev_k = k;
        o += w;
        offsets[i + 1] = (int32_t)o;
    }
    return o;
}

static inline unsigned char *put_hex(unsigned char *d, const unsigned char *s, int k)
{
    int j;
    for (j = 0; j < k; j++) {
        *d++ = (unsigned char)HEX_UP[s[j] >> 4];
        *d++ = (unsigned char)HEX_UP[s[j] & 0xF];
    }
    return d;
}

int64_t rmq_message_ids(const unsigned char *data, const int64_t *pos, const int64_t *port, const int64_t *sys_flag,
                        int64_t v6_bit, const int64_t *offset, int64_t n, int32_t *offsets, unsigned char *out)
{
    int64_t i, o = 0, prev_o = -1;
    const unsigned char *prev_a = NULL;
    int prev_k = 0;
    offsets[0] = 0;
    for (i = 0; i < n; i++) {
        const unsigned char *a = data + pos[i];
        uint32_t p = (uint32_t)port[i];
        uint64_t off = (uint64_t)offset[i];
        unsigned char *d = out + o;
        int j, k = (sys_flag[i] & v6_bit) ? 16 : 4;
        if (prev_o >= 0 && k == prev_k && port[i] == port[i - 1] && same_addr(a, prev_a, k)) {
            /* same address and port: same prefix */
            if (k == 4)
                memcpy(d, out + prev_o, 16);
            else
                memcpy(d, out + prev_o, 40);
            d += 2 * k + 8;
        } else {
            unsigned char pb[4];
            for (j = 0; j < 4; j++)
                pb[j] = (unsigned char)(p >> (24 - 8 * j));
            d = put_hex(d, a, k);
            d = put_hex(d, pb, 4);
        }
        prev_o = o;
        prev_a = a;
        prev_k = k;
        for (j = 7; j >= 0; j--) {
            memcpy(d + 2 * j, HEX_PAIRS + 2 * (off & 0xFF), 2);
            off >>= 8;
        }
        d += 16;
        o = d - out;
        offsets[i + 1] = (int32_t)o;
    }
    return o;
}

/* ---- properties ---------------------------------------------------------------------------------- */

/* The entries of one properties string p[0, n) into sc (4 int64 each: name start, name length,
 * value start, value length, relative to p); returns how many; *tags / *keys: the TAGS / KEYS
 * entry or -1. One byte loop finds the separators (strings are short: calls cost more than bytes). */
static int64_t props_entries(const unsigned char *p, int64_t n, int ascii, int64_t *sc, int64_t *tags,
                             int64_t *keys)
{
    int64_t s = 0, ne = 0, i;
    *tags = *keys = -1;
    while (s < n) {
        int64_t x = -1, e = s, nl, vl, j;
        for (;;) { /* to the next 0x02 (or the end), noting the first 0x01 */
            while (e + 8 <= n) { /* skip words with no byte < 0x03 */
                uint64_t v = rmq_load_le64(p + e);
                uint64_t t = (v - LOW3_BITS) & ~v & HIGH_BITS;
                if (t)
                    break;
                e += 8;
            }
            while (e < n && p[e] > 0x02)
                e++;
            if (e >= n || p[e] == 0x02)
                break;
            if (p[e] == 0x01 && x < 0)
                x = e;
            e++;
        }
        i = x;
        nl = i - s;
        vl = e - i - 1;
        if (x >= 0 && nl > 0 && vl > 0) {
            const unsigned char *nm = p + s;
            for (j = 0; j < ne; j++) {
                int64_t ol = sc[4 * j + 1];
                const unsigned char *o = p + sc[4 * j];
                if (ascii ? (ol == nl && o[0] == nm[0] && memcmp(o, nm, (size_t)nl) == 0) : utf8_eq(o, ol, nm, nl))
                    break;
            }
            if (j == ne) {
                sc[4 * ne] = s;
                sc[4 * ne + 1] = nl;
                if (nl == 4 && memcmp(nm, "TAGS", 4) == 0)
                    *tags = ne;
                else if (nl == 4 && memcmp(nm, "KEYS", 4) == 0)
                    *keys = ne;
                ne++;
            }
            sc[4 * j + 2] = i + 1;
            sc[4 * j + 3] = vl;
        }
        s = e + 1;
    }
    return ne;
}

/* copy s[0, n) to d with replacement unless the record is known ASCII; returns bytes written */
static inline int64_t put_text(unsigned char *d, const unsigned char *s, int64_t n, int ascii)
{
    if (ascii) {
        copy_short(d, s, n);
        return n;
    }
    return rmq_utf8_copy(d, s, n);
}

void rmq_props_fill(const unsigned char *data, const int64_t *pos, const int64_t *len, int64_t n, int all_ascii,
                    int64_t *sc, rmq_props_out *o, rmq_props_sizes *sz)
{
    int64_t r;
    rmq_props_sizes t = {0, 0, 0, 0, 0, 0};
    o->map_offsets[0] = 0;
    o->key_offsets[0] = 0;
    o->value_offsets[0] = 0;
    o->tag_offsets[0] = 0;
    o->keys_offsets[0] = 0;
    o->token_offsets[0] = 0;
    for (r = 0; r < n; r++) {
        const unsigned char *p = data + pos[r];
        int ascii = all_ascii || is_ascii(p, len[r]);
        int64_t tg, ky, j;
        int64_t ne = props_entries(p, len[r], ascii, sc, &tg, &ky);
        for (j = 0; j < ne; j++) {
            t.key_bytes += put_text(o->key_data + t.key_bytes, p + sc[4 * j], sc[4 * j + 1], ascii);
            t.value_bytes += put_text(o->value_data + t.value_bytes, p + sc[4 * j + 2], sc[4 * j + 3], ascii);
            t.entries++;
            o->key_offsets[t.entries] = (int32_t)t.key_bytes;
            o->value_offsets[t.entries] = (int32_t)t.value_bytes;
        }
        if (tg >= 0)
            t.tag_bytes += put_text(o->tag_data + t.tag_bytes, p + sc[4 * tg + 2], sc[4 * tg + 3], ascii);
        if (ky >= 0) {
            const unsigned char *va = p + sc[4 * ky + 2];
            int64_t vl = sc[4 * ky + 3], s = 0;
            while (s < vl) {
                int64_t e = s;
                while (e < vl && va[e] != ' ')
                    e++;
                if (e > s) {
                    t.token_bytes += put_text(o->token_data + t.token_bytes, va + s, e - s, ascii);
                    t.tokens++;
                    o->token_offsets[t.tokens] = (int32_t)t.token_bytes;
                }
                s = e + 1;
            }
        }
        o->map_offsets[r + 1] = (int32_t)t.entries;
        o->tag_offsets[r + 1] = (int32_t)t.tag_bytes;
        o->tag_valid[r] = tg >= 0;
        o->keys_offsets[r + 1] = (int32_t)t.tokens;
    }
    *sz = t;
}
