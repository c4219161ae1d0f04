/*
 * wake_floor.c - what the live store's wake-up alone costs on this machine, with no Python and no
 * store: the floor under bench_live.py's writer-to-follower latency.
 *
 * A writer process and a waiter process share a map of a small file. The writer, at a fixed rate
 * (open loop, as bench_live.py latency: message i is due at t0 + i / rate), stores message i's
 * due time, publishes the count (release) and bumps a wake slot with rmq_notify_bump, the call a
 * put makes; the waiter reads the slot's seq, takes every message published since its last look
 * (latency: now - due, so a late writer counts), and sleeps in rmq_notify_wait_spin (spin 0: the
 * futex, as a follower's get_messages(wait=) sleeps) when there is none. Both use
 * csrc/rmq_notify.h, so this is the store's mechanism itself.
 *
 * Build and run (Linux):
 *   cc -O2 -I csrc -o /tmp/wake_floor bench/wake_floor.c && /tmp/wake_floor 100000 2 1
 * Arguments: rate (msg/s), seconds, pin (1: writer on the first CPU, waiter on the second), and
 * optionally the waiter's spin before it sleeps, in microseconds (NotifyFile.wait_spin).
 * Prints the latency's p50 / p99 / p99.9 / max (us), the writer's own lateness p99 (how late its
 * bumps returned), and the same paced loop's lateness with no bumps (this host's floor).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rmq_notify.h"

#define HEAD 64 /* the slot at 0, the published count at 8, then the due times */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double pct(int64_t *v, int64_t n, double p)
{
    int64_t i = (int64_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return n ? (double)v[i < n ? i : n - 1] / 1000.0 : 0.0;
}

static void pin(int nth)
{
    cpu_set_t have, one;
    int cpu, seen = 0;
    if (sched_getaffinity(0, sizeof have, &have) != 0)
        return;
    for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &have) && seen++ == nth) {
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof one, &one);
            return;
        }
}

/* the paced loop: call bump (or nothing) at each due time; fills late[] (ns after due) */
static void paced(int64_t n, int64_t period, unsigned char *map, int bump, int64_t *late)
{
    int64_t t0 = rmq_notify_now_ns() + 1000000, i, due;
    int64_t *count = (int64_t *)(map + 8), *dues = (int64_t *)(map + HEAD);
    for (i = 0; i < n; i++) {
        due = t0 + i * period;
        while (rmq_notify_now_ns() < due)
            rmq_cpu_relax();
        if (bump) {
            dues[i] = due;
            __atomic_store_n(count, i + 1, __ATOMIC_RELEASE);
            rmq_notify_bump(map);
        }
        late[i] = rmq_notify_now_ns() - due;
    }
}

int main(int argc, char **argv)
{
    int64_t rate = argc > 1 ? atoll(argv[1]) : 100000;
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    int do_pin = argc > 3 ? atoi(argv[3]) : 1;
    int64_t spin_ns = argc > 4 ? (int64_t)(atof(argv[4]) * 1000.0) : 0;
    int64_t n = (int64_t)(rate * seconds), period = 1000000000 / rate;
    int64_t n_floor = n < 100000 ? n : 100000; /* the paced loop alone: at most 100k steps */
    size_t size = HEAD + (size_t)n * 8;
    char path[] = "/tmp/wake_floor.XXXXXX";
    int fd = mkstemp(path), status = 0;
    unsigned char *map;
    int64_t *lat, *late, *floor_late;
    pid_t child;
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        perror("wake_floor: the shared file");
        return 1;
    }
    unlink(path); /* the map keeps it: nothing is left behind */
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    lat = mmap(NULL, (size_t)n * 8, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    late = malloc((size_t)n * 8);
    floor_late = malloc((size_t)n * 8);
    if (map == MAP_FAILED || lat == MAP_FAILED || !late || !floor_late) {
        perror("wake_floor: memory");
        return 1;
    }
    child = fork();
    if (child == 0) { /* the waiter */
        int64_t seen = 0, c, now;
        uint32_t token;
        if (do_pin)
            pin(1);
        while (seen < n) {
            token = rmq_notify_seq(map);
            c = __atomic_load_n((int64_t *)(map + 8), __ATOMIC_ACQUIRE);
            if (c > seen) {
                now = rmq_notify_now_ns();
                for (; seen < c; seen++)
                    lat[seen] = now - ((int64_t *)(map + HEAD))[seen];
                continue;
            }
            if (rmq_notify_wait_spin(map, token, 5000000000LL, NULL, 1, 0, spin_ns) == RMQ_NOTIFY_TIMEOUT) {
                fprintf(stderr, "wake_floor: a wait ran out (5 s) at message %lld\n", (long long)seen);
                _exit(2);
            }
        }
        _exit(0);
    }
    if (do_pin)
        pin(0);
    usleep(200000); /* the waiter asleep on the slot */
    paced(n_floor, period, map, 0, floor_late);
    paced(n, period, map, 1, late);
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1;
    qsort(lat, (size_t)n, 8, cmp_i64);
    qsort(late, (size_t)n, 8, cmp_i64);
    qsort(floor_late, (size_t)n_floor, 8, cmp_i64);
    printf("wake_floor rate=%lld n=%lld pinned=%d spin_us=%.0f p50_us=%.1f p99_us=%.1f p99.9_us=%.1f "
           "max_us=%.1f writer_late_p99_us=%.1f host_late_p99_us=%.1f\n",
           (long long)rate, (long long)n, do_pin, spin_ns / 1000.0, pct(lat, n, 50), pct(lat, n, 99),
           pct(lat, n, 99.9), pct(lat, n, 100), pct(late, n, 99), pct(floor_late, n_floor, 99));
    return 0;
}
