/* rmq_keycache.c - see rmq_keycache.h */
#include "rmq_keycache.h"

#include <stdlib.h>
#include <string.h>

#include "rmq_endian.h"

#if !defined(_WIN32)
#include <sys/mman.h>
#endif

static rmq_kc_slot *alloc_table(uint64_t cap, size_t *bytes) {
    size_t n = (size_t)cap * sizeof(rmq_kc_slot);
    rmq_kc_slot *t;
#if !defined(_WIN32)
    void *m = mmap(0, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 0;
#if defined(MADV_HUGEPAGE)
    madvise(m, n, MADV_HUGEPAGE); /* one TLB entry per 2 MiB: the probes are random */
#endif
    t = (rmq_kc_slot *)m;
#else
    t = (rmq_kc_slot *)malloc(n);
    if (!t) return 0;
#endif
    for (uint64_t i = 0; i < cap; i++) t[i].phys = -1;
    *bytes = n;
    return t;
}

static void free_table(rmq_kc_slot *t, size_t bytes) {
    if (!t) return;
#if !defined(_WIN32)
    munmap(t, bytes);
#else
    (void)bytes;
    free(t);
#endif
}

static inline uint64_t mix(int32_t hash) { /* the index hash is Java's String.hashCode: spread it */
    uint64_t x = (uint32_t)hash;
    x *= 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
}

/* n: how many entries this call stands for (1 for a new entry; the held count when re-inserting
 * while growing); the count saturates at 2, "more than one" */
static void put_raw(rmq_kc_slot *t, uint64_t mask, int32_t hash, int64_t phys, int32_t n, uint64_t *used) {
    uint64_t i = mix(hash) & mask;
    for (;;) {
        rmq_kc_slot *s = &t[i];
        if (s->phys < 0) {
            s->hash = hash;
            s->phys = phys;
            s->count = n > 2 ? 2 : n;
            (*used)++;
            return;
        }
        if (s->hash == hash) {
            if (phys > s->phys) s->phys = phys;
            s->count = s->count + n > 2 ? 2 : s->count + n;
            return;
        }
        i = (i + 1) & mask;
    }
}

int rmq_kc_init(rmq_keycache *c, uint64_t cap) {
    uint64_t n = 16;
    while (n < cap) n <<= 1;
    memset(c, 0, sizeof(*c));
    c->t = alloc_table(n, &c->bytes);
    if (!c->t) return -1;
    c->cap = n;
    return 0;
}

void rmq_kc_free(rmq_keycache *c) {
    free_table(c->t, c->bytes);
    memset(c, 0, sizeof(*c));
}

static int grow(rmq_keycache *c) {
    size_t bytes;
    uint64_t cap = c->cap * 2, used = 0;
    rmq_kc_slot *t = alloc_table(cap, &bytes);
    if (!t) return -1;
    for (uint64_t i = 0; i < c->cap; i++)
        if (c->t[i].phys >= 0) put_raw(t, cap - 1, c->t[i].hash, c->t[i].phys, c->t[i].count, &used);
    free_table(c->t, c->bytes);
    c->t = t;
    c->cap = cap;
    c->bytes = bytes;
    c->used = used;
    return 0;
}

int rmq_kc_put(rmq_keycache *c, int32_t hash, int64_t phys) {
    if ((c->used + 1) * 10 > c->cap * 7 && grow(c) != 0) return -1; /* load factor <= 0.7 */
    put_raw(c->t, c->cap - 1, hash, phys, 1, &c->used);
    return 0;
}

int64_t rmq_kc_get(const rmq_keycache *c, int32_t hash) {
    int32_t n;
    return rmq_kc_get_n(c, hash, &n);
}

void rmq_kc_prefetch(const rmq_keycache *c, int32_t hash) {
    if (c->t) __builtin_prefetch(&c->t[mix(hash) & (c->cap - 1)], 0, 3);
}

int64_t rmq_kc_get_n(const rmq_keycache *c, int32_t hash, int32_t *n) {
    *n = 0;
    if (!c->t) return -1;
    uint64_t mask = c->cap - 1, i = mix(hash) & mask;
    for (;;) {
        const rmq_kc_slot *s = &c->t[i];
        if (s->phys < 0) return -1;
        if (s->hash == hash) {
            *n = s->count;
            return s->phys;
        }
        i = (i + 1) & mask;
    }
}

int rmq_kc_ingest(rmq_keycache *c, const unsigned char *index, uint32_t slots, uint32_t from, uint32_t to) {
    if (to > from) /* size once for the whole range, not by doubling along the way */
        while ((c->used + (to - from)) * 10 > c->cap * 7)
            if (grow(c) != 0) return -1;
    const unsigned char *e = index + 40 + (size_t)slots * 4 + (size_t)from * 20;
    for (uint32_t i = from; i < to; i++, e += 20) {
        int64_t phys = rmq_load_be64s(e + 4);
        if (phys < 0) continue;
        if (rmq_kc_put(c, rmq_load_be32s(e), phys) != 0) return -1;
    }
    return 0;
}
