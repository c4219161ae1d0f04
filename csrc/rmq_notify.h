/*
 * rmq_notify.h - the publication words of a live store (header only, plain C99, no Python.h).
 *
 * A writer publishes; readers in its own and in other processes wait. Two things are shared:
 *
 * 1. Consume-queue units, published by their size field. A unit is 20 big-endian bytes (offset 8,
 *    size 4, tags code 8); its offset and tags are stored first, then its size with a release
 *    store (rmq_cq_publish_unit). A reader that loads a non-zero size with acquire ordering
 *    (rmq_cq_unit_size) sees the whole unit, and, because dispatch only writes units of records
 *    it saw complete (the CommitLog's live end, release/acquire as well), the whole record. The
 *    size sits at byte 8 of the unit, 4-aligned in a mapped file (20 * k + 8), so the store and
 *    the load are single instructions; a unit whose size still reads 0 is not published yet.
 *
 * 2. Wake slots: two host-order uint32 words, `seq` then `waiters`, 8-aligned, in the notify file
 *    that rmqcore/live/notifyfile.py maps (layout.py documents its bytes). The publisher bumps
 *    `seq` (rmq_notify_bump) after the units it announces, and clears `waiters` in the same atomic
 *    step (one 64-bit compare-and-swap over both words); if `waiters` was set it wakes every
 *    thread waiting on `seq` (FUTEX_WAKE, shared: the futex key is the file page, so waiters in
 *    other processes are woken too). A waiter reads `seq` before looking for data, then
 *    (rmq_notify_wait) sets `waiters` and sleeps while `seq` still holds what it read. The
 *    `waiters` store and the `seq` load on one side, the swap on the other, are sequentially
 *    consistent: either the waiter sees the new `seq`, or the publisher sees the flag and wakes
 *    it; the kernel compares `seq` again when the waiter goes to sleep, so no wake-up is lost.
 *    Why one step: were `seq` added to first and `waiters` cleared after, a waiter could read the
 *    new `seq`, set its flag, and have that bump clear it and wake nobody (the waiter not asleep
 *    yet); the next bumps would see no flag and it would sleep through them to its timeout (seen
 *    on two pinned CPUs: a follower's 1 s wait ran out while the writer bumped 100,000 times).
 *    A flag is cleared only with a `seq` the waiter has not seen. Without a futex (not Linux) the
 *    waiter naps RMQ_NOTIFY_NAP_NS at a time instead (bounded latency, no lost wake-up either).
 *
 * Callers check bounds and alignment (4) once; these helpers never read or write past the word.
 */
#ifndef RMQ_NOTIFY_H
#define RMQ_NOTIFY_H

#include <stdint.h>

#include "rmq_endian.h"

#if defined(__linux__)
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if !defined(_WIN32)
#include <time.h>
#endif

#define RMQ_NOTIFY_NAP_NS 200000 /* the wait step where there is no futex */

/* rmq_notify_wait's answers */
#define RMQ_NOTIFY_TIMEOUT 0
#define RMQ_NOTIFY_CHANGED 1
#define RMQ_NOTIFY_CANCELLED 2

/* -- consume-queue units ------------------------------------------------------------------------ */
RMQ_INLINE void rmq_cq_publish_unit(unsigned char *u, int64_t phys, int32_t size, int64_t tags)
{
    rmq_store_be64(u, (uint64_t)phys);
    rmq_store_be64(u + 12, (uint64_t)tags);
    rmq_publish_be32(u + 8, (uint32_t)size); /* last, release: the unit is whole once this is seen */
}

RMQ_INLINE int32_t rmq_cq_unit_size(const unsigned char *u) { return rmq_observe_be32s(u + 8); }

/* -- clocks and sleeping ------------------------------------------------------------------------- */
RMQ_INLINE int64_t rmq_notify_now_ns(void)
{
#if defined(_WIN32)
    return 0; /* not built there (rmq_endian.h's atomics need GCC or Clang) */
#else
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
#endif
}

RMQ_INLINE void rmq_futex_wake_all(uint32_t *word)
{
#if defined(__linux__)
    (void)syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#else
    (void)word;
#endif
}

/* Sleep while *word == expected, at most ns (a wake-up, a signal or a changed word end it early). */
RMQ_INLINE void rmq_futex_wait(const uint32_t *word, uint32_t expected, int64_t ns)
{
#if defined(__linux__)
    struct timespec t;
    t.tv_sec = (time_t)(ns / 1000000000);
    t.tv_nsec = (long)(ns % 1000000000);
    (void)syscall(SYS_futex, word, FUTEX_WAIT, expected, &t, NULL, 0);
#elif !defined(_WIN32)
    struct timespec t;
    (void)word;
    (void)expected;
    if (ns > RMQ_NOTIFY_NAP_NS)
        ns = RMQ_NOTIFY_NAP_NS;
    t.tv_sec = 0;
    t.tv_nsec = (long)ns;
    nanosleep(&t, NULL);
#else
    (void)word;
    (void)expected;
    (void)ns;
#endif
}

/* -- header words ------------------------------------------------------------------------------- */
/* A follower reads the generation and state before and after it reads units (a seqlock): the
 * acquire fence before each load keeps the unit loads before it from moving after it, and the
 * fence after each store keeps the writer's later stores (recovery zeroing units) from being seen
 * before the state that announces them. */
RMQ_INLINE uint32_t rmq_notify_load32(const void *p)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
}

RMQ_INLINE int64_t rmq_notify_load64(const void *p)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n((const int64_t *)p, __ATOMIC_ACQUIRE);
}

RMQ_INLINE void rmq_notify_store32(void *p, uint32_t v)
{
    __atomic_store_n((uint32_t *)p, v, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

RMQ_INLINE void rmq_notify_store64(void *p, int64_t v)
{
    __atomic_store_n((int64_t *)p, v, __ATOMIC_RELEASE);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* -- wake slots ---------------------------------------------------------------------------------- */
RMQ_INLINE uint32_t rmq_notify_seq(const unsigned char *slot)
{
    return __atomic_load_n((const uint32_t *)slot, __ATOMIC_ACQUIRE);
}

/* seq += 1 after what it announces, and waiters = 0, in one atomic step (see 2. above; the slot is
 * 8-aligned); wake the waiters if any had flagged themselves. Returns the new seq. */
RMQ_INLINE uint32_t rmq_notify_bump(unsigned char *slot)
{
    uint64_t *pair = (uint64_t *)slot;
    uint64_t old = __atomic_load_n(pair, __ATOMIC_RELAXED), nw;
    uint32_t was[2], next[2];
    do { /* a failed swap reloads old */
        memcpy(was, &old, sizeof was); /* was[0] = seq, was[1] = waiters, in either byte order */
        next[0] = was[0] + 1u;
        next[1] = 0u;
        memcpy(&nw, next, sizeof nw);
    } while (!__atomic_compare_exchange_n(pair, &old, nw, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    if (was[1] != 0)
        rmq_futex_wake_all((uint32_t *)slot);
    return next[0];
}

/* A publisher's cheap check: bump only when a waiter flagged itself, and only while `waits` (a count
 * of waits in progress; NULL: always) is nonzero. The fence orders the publisher's end before both
 * loads and pairs with the waiter's flag store and re-check (Dekker): no wake-up is lost. The
 * appender pokes the reput thread so, with the notify file's count: only a waiting reader needs it
 * at once (a store nobody waits on is dispatched on the reput thread's timed naps, or by a reader
 * for itself); a wait counts itself, then pokes the slot itself (rmq_notify_waits_add and
 * rmq_notify_poke), so a put it missed is dispatched all the same. */
RMQ_INLINE void rmq_notify_poke_wanted(unsigned char *slot, const uint32_t *waits)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if ((waits == NULL || __atomic_load_n(waits, __ATOMIC_RELAXED) != 0)
        && __atomic_load_n((const uint32_t *)slot + 1, __ATOMIC_RELAXED) != 0)
        (void)rmq_notify_bump(slot);
}

/* rmq_notify_poke_wanted with no count: bump if a waiter flagged itself. */
RMQ_INLINE void rmq_notify_poke(unsigned char *slot) { rmq_notify_poke_wanted(slot, NULL); }

/* Add `delta` (+1 or -1) to a count of waits in progress; it never goes below 0 (a writer's open
 * resets it, and a wait that began before then leaves after). Returns the new count. */
RMQ_INLINE uint32_t rmq_notify_waits_add(uint32_t *waits, int delta)
{
    uint32_t v = __atomic_load_n(waits, __ATOMIC_RELAXED), n;
    do {
        if (delta < 0 && v == 0)
            return 0;
        n = delta < 0 ? v - 1u : v + 1u;
    } while (!__atomic_compare_exchange_n(waits, &v, n, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return n;
}

/* A waiter about to look at what the publisher publishes (then maybe wait): flag itself first. */
RMQ_INLINE void rmq_notify_arm(unsigned char *slot)
{
    __atomic_store_n((uint32_t *)slot + 1, 1u, __ATOMIC_SEQ_CST);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* One step of a spin: tell the CPU (a hyperthread sibling, the power governor) that this is a
 * busy-wait. */
RMQ_INLINE void rmq_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Spin while seq == expected, until the clock reaches `until` or *cancel is set (cancel may be
 * NULL); 1 when seq changed. The waiters word is left alone meanwhile, so a publisher's bump makes
 * no FUTEX_WAKE call for a spinning waiter. The clock and cancel are looked at every 16 loads. */
RMQ_INLINE int rmq_notify_spin(const uint32_t *seq, uint32_t expected, int64_t until, const int64_t *cancel)
{
    unsigned i;
    for (i = 1;; i++) {
        if (__atomic_load_n(seq, __ATOMIC_ACQUIRE) != expected)
            return 1;
        if ((i & 15) == 0
            && ((cancel != NULL && rmq_observe_i64(cancel) != 0) || rmq_notify_now_ns() >= until))
            return 0;
        rmq_cpu_relax();
    }
}

/* Wait until seq != expected (RMQ_NOTIFY_CHANGED), *cancel != 0 (RMQ_NOTIFY_CANCELLED; cancel may
 * be NULL) or ns pass (RMQ_NOTIFY_TIMEOUT). First spin up to spin_ns (0: not at all) on seq, as
 * glibc's adaptive mutexes spin before they sleep: a publication within that time is seen without
 * a futex sleep and wake-up (two scheduler trips), at the cost of a core busy for that long; then
 * sleep on the futex. `flag`: set the waiters word (0 when the slot's page is mapped read-only:
 * then only other waiters' flags, or the publisher's next look, wake this one, and the sleeps are
 * cut to `slice_ns`). */
RMQ_INLINE int rmq_notify_wait_spin(unsigned char *slot, uint32_t expected, int64_t ns, const int64_t *cancel,
                                    int flag, int64_t slice_ns, int64_t spin_ns)
{
    uint32_t *seq = (uint32_t *)slot;
    uint32_t *waiters = seq + 1;
    int64_t now = rmq_notify_now_ns(), deadline = now + ns, step;
    if (ns < 0 || deadline < now)
        deadline = INT64_MAX; /* no limit (or one past the clock's range) */
    if (spin_ns > 0
        && rmq_notify_spin(seq, expected, spin_ns < deadline - now ? now + spin_ns : deadline, cancel))
        return RMQ_NOTIFY_CHANGED;
    for (;;) {
        if (cancel != NULL && rmq_observe_i64(cancel) != 0)
            return RMQ_NOTIFY_CANCELLED;
        if (__atomic_load_n(seq, __ATOMIC_ACQUIRE) != expected)
            return RMQ_NOTIFY_CHANGED;
        if (flag) {
            __atomic_store_n(waiters, 1u, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(seq, __ATOMIC_SEQ_CST) != expected)
                return RMQ_NOTIFY_CHANGED;
        }
        now = rmq_notify_now_ns();
        if (now >= deadline)
            return RMQ_NOTIFY_TIMEOUT;
        step = deadline - now;
        if (slice_ns > 0 && step > slice_ns)
            step = slice_ns;
        rmq_futex_wait(seq, expected, step);
    }
}

/* Sleep until the int64 at `word` reaches `target` (CHANGED), `cancel[0]` is non-zero (CANCELLED) or
 * `ns` pass (TIMEOUT; ns < 0: no limit), looking every `poll_ns` while the word moves and backing
 * off to RMQ_REACH_BACKOFF times that while it does not (an idle store's helper threads wake ~30
 * times a second, not 500). No futex: the word is written by a writer that wakes nobody (the
 * CommitLog's live end), so this is a plain timed poll, without the GIL: a helper thread that
 * waits for a writer's progress here costs that writer no GIL hand-over. */
#define RMQ_REACH_BACKOFF 16
RMQ_INLINE int rmq_notify_wait_reach(const int64_t *word, int64_t target, int64_t ns, const int64_t *cancel,
                                     int64_t poll_ns)
{
    int64_t now = rmq_notify_now_ns(), deadline = now + ns, step, nap, seen, v;
    if (ns < 0 || deadline < now)
        deadline = INT64_MAX;
    if (poll_ns <= 0)
        poll_ns = RMQ_NOTIFY_NAP_NS;
    nap = poll_ns;
    seen = rmq_observe_i64(word);
    for (;;) {
        if (cancel != NULL && rmq_observe_i64(cancel) != 0)
            return RMQ_NOTIFY_CANCELLED;
        v = rmq_observe_i64(word);
        if (v >= target)
            return RMQ_NOTIFY_CHANGED;
        if (v != seen) { /* the writer is writing: look often */
            seen = v;
            nap = poll_ns;
        }
        now = rmq_notify_now_ns();
        if (now >= deadline)
            return RMQ_NOTIFY_TIMEOUT;
        step = deadline - now < nap ? deadline - now : nap;
        if (nap < poll_ns * RMQ_REACH_BACKOFF)
            nap *= 2;
#if !defined(_WIN32)
        {
            struct timespec t;
            t.tv_sec = (time_t)(step / 1000000000);
            t.tv_nsec = (long)(step % 1000000000);
            nanosleep(&t, NULL);
        }
#endif
    }
}

/* rmq_notify_wait_spin without the spin (the reput thread's naps). */
RMQ_INLINE int rmq_notify_wait(unsigned char *slot, uint32_t expected, int64_t ns, const int64_t *cancel, int flag,
                               int64_t slice_ns)
{
    return rmq_notify_wait_spin(slot, expected, ns, cancel, flag, slice_ns, 0);
}

#endif /* RMQ_NOTIFY_H */
