/*
 * rmq_lookup.c - see rmq_lookup.h.
 */
#include "rmq_lookup.h"

#include <string.h>

#include "rmq_dispatch.h"

static int same(const unsigned char *a, size_t an, const unsigned char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

int rmq_props_have_key(const unsigned char *props, size_t n, const unsigned char *key, size_t klen)
{
    const unsigned char *keys = NULL, *uniq = NULL, *seg = props, *end = props + n;
    size_t keys_len = 0, uniq_len = 0;

    if (!rmq_utf8_valid(props, n))
        return -1;
    while (seg <= end) {
        const unsigned char *stop = memchr(seg, 0x02, (size_t)(end - seg));
        const unsigned char *sep;
        if (stop == NULL)
            stop = end;
        sep = memchr(seg, 0x01, (size_t)(stop - seg));
        /* name and value both non-empty; the value runs to the segment's end */
        if (sep != NULL && sep > seg && sep + 1 < stop) {
            size_t name_len = (size_t)(sep - seg);
            if (same(seg, name_len, (const unsigned char *)"KEYS", 4)) {
                keys = sep + 1;
                keys_len = (size_t)(stop - sep - 1);
            } else if (same(seg, name_len, (const unsigned char *)"UNIQ_KEY", 8)) {
                uniq = sep + 1;
                uniq_len = (size_t)(stop - sep - 1);
            }
        }
        if (stop == end)
            break;
        seg = stop + 1;
    }
    if (klen == 0)
        return 0; /* empty tokens are never indexed */
    if (uniq != NULL && same(uniq, uniq_len, key, klen))
        return 1;
    if (keys != NULL) {
        const unsigned char *t = keys, *kend = keys + keys_len;
        while (t < kend) {
            const unsigned char *sp = memchr(t, ' ', (size_t)(kend - t));
            if (sp == NULL)
                sp = kend;
            if (same(t, (size_t)(sp - t), key, klen))
                return 1;
            t = sp + 1;
        }
    }
    return 0;
}
