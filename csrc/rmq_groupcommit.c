/* rmq_groupcommit.c - see rmq_groupcommit.h */
#include "rmq_groupcommit.h"

#if defined(_WIN32)

rmq_gc *rmq_gc_new(const int64_t *live, int64_t durable) { (void)live; (void)durable; return 0; }
void rmq_gc_free(rmq_gc *g) { (void)g; }
void rmq_gc_set_sync(rmq_gc *g, rmq_gc_sync_fn fn, void *ctx) { (void)g; (void)fn; (void)ctx; }
int rmq_gc_add_file(rmq_gc *g, int fd, int64_t f, int64_t s) { (void)g; (void)fd; (void)f; (void)s; return -38; }
void rmq_gc_request(rmq_gc *g, int64_t o) { (void)g; (void)o; }
int rmq_gc_wait(rmq_gc *g, int64_t o, int64_t t) { (void)g; (void)o; (void)t; return 0; }
int rmq_gc_run(rmq_gc *g) { (void)g; return 0; }
void rmq_gc_stop(rmq_gc *g) { (void)g; }
int64_t rmq_gc_durable(const rmq_gc *g) { (void)g; return 0; }
int64_t rmq_gc_flushes(const rmq_gc *g) { (void)g; return 0; }
int rmq_gc_error(const rmq_gc *g) { (void)g; return 0; }

#else

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#define RMQ_GC_BATCH 16 /* files synced per round, at most */

typedef struct {
    int fd;
    char *map; /* the service's own read-only map of the file: msync syncs a range of it */
    int64_t from, size;
} gc_file;

struct rmq_gc {
    pthread_mutex_t mu;
    pthread_cond_t work; /* the flusher has something to do */
    pthread_cond_t done; /* durable moved, or the service stopped or failed */
    const int64_t *live;
    int64_t wanted;  /* largest offset asked for (under mu) */
    int64_t durable; /* written under mu, read lock-free (atomic) */
    int64_t flushes;
    int err, stop, idle;
    gc_file *files;
    size_t nfiles, cap;
    rmq_gc_sync_fn sync; /* NULL: sync_range */
    void *sync_ctx;
};

static int clock_id(void) {
#if defined(__APPLE__)
    return CLOCK_REALTIME; /* no pthread_condattr_setclock */
#else
    return CLOCK_MONOTONIC;
#endif
}

static void deadline_after(struct timespec *ts, int64_t ms) {
    clock_gettime(clock_id(), ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += 1;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Make bytes [lo, hi) of the file durable. On Linux msync(MS_SYNC) of a shared map is
 * vfs_fsync_range(file, lo, hi, datasync): it writes back and waits for that range only, then
 * commits the journal and flushes the device cache as fdatasync does. fdatasync itself walks the
 * whole file and, with producers dirtying pages right behind it, was measured here to take
 * 100+ ms per call instead of < 1 ms. Pages dirtied through the appender's map are in the same
 * page cache, so syncing through this map covers them. */
static int sync_range(const gc_file *f, int64_t lo, int64_t hi) {
#if defined(__APPLE__)
    (void)lo; (void)hi;
    return fsync(f->fd);
#else
    if (f->map == 0) return fdatasync(f->fd);
    long page = sysconf(_SC_PAGESIZE);
    int64_t a = lo - lo % page;
    return msync(f->map + a, (size_t)(hi - a), MS_SYNC);
#endif
}

static void drop_file(gc_file *f) {
    if (f->map) munmap(f->map, (size_t)f->size);
    close(f->fd);
}

rmq_gc *rmq_gc_new(const int64_t *live, int64_t durable) {
    rmq_gc *g = (rmq_gc *)calloc(1, sizeof(*g));
    if (!g) return 0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
#if !defined(__APPLE__)
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
#endif
    pthread_mutex_init(&g->mu, 0);
    pthread_cond_init(&g->work, &ca);
    pthread_cond_init(&g->done, &ca);
    pthread_condattr_destroy(&ca);
    g->live = live;
    g->durable = g->wanted = durable;
    return g;
}

void rmq_gc_set_sync(rmq_gc *g, rmq_gc_sync_fn fn, void *ctx) {
    pthread_mutex_lock(&g->mu);
    g->sync = fn;
    g->sync_ctx = ctx;
    pthread_mutex_unlock(&g->mu);
}

void rmq_gc_free(rmq_gc *g) {
    if (!g) return;
    for (size_t i = 0; i < g->nfiles; i++) drop_file(&g->files[i]);
    free(g->files);
    pthread_cond_destroy(&g->work);
    pthread_cond_destroy(&g->done);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

int rmq_gc_add_file(rmq_gc *g, int fd, int64_t file_from, int64_t file_size) {
    int rc = 0;
    pthread_mutex_lock(&g->mu);
    if (g->nfiles && g->files[g->nfiles - 1].from >= file_from) goto out; /* already known */
    if (g->nfiles == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        gc_file *f = (gc_file *)realloc(g->files, cap * sizeof(*f));
        if (!f) { rc = -ENOMEM; goto out; }
        g->files = f;
        g->cap = cap;
    }
    int d = dup(fd);
    if (d < 0) { rc = -errno; goto out; }
    void *m = mmap(0, (size_t)file_size, PROT_READ, MAP_SHARED, d, 0);
    g->files[g->nfiles].fd = d;
    g->files[g->nfiles].map = m == MAP_FAILED ? 0 : (char *)m; /* no map: fdatasync the whole file */
    g->files[g->nfiles].from = file_from;
    g->files[g->nfiles].size = file_size;
    g->nfiles++;
    if (g->idle) pthread_cond_signal(&g->work);
out:
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void rmq_gc_request(rmq_gc *g, int64_t offset) {
    if (__atomic_load_n(&g->durable, __ATOMIC_ACQUIRE) >= offset) return;
    if (__atomic_load_n(&g->wanted, __ATOMIC_RELAXED) >= offset) return; /* its flush is asked for */
    pthread_mutex_lock(&g->mu);
    if (offset > g->wanted) __atomic_store_n(&g->wanted, offset, __ATOMIC_RELAXED);
    if (g->idle) pthread_cond_signal(&g->work);
    pthread_mutex_unlock(&g->mu);
}

int rmq_gc_wait(rmq_gc *g, int64_t offset, int64_t timeout_ms) {
    if (__atomic_load_n(&g->durable, __ATOMIC_ACQUIRE) >= offset) return 1;
    struct timespec ts;
    deadline_after(&ts, timeout_ms < 0 ? 0 : timeout_ms);
    pthread_mutex_lock(&g->mu);
    if (offset > g->wanted) __atomic_store_n(&g->wanted, offset, __ATOMIC_RELAXED);
    if (g->idle) pthread_cond_signal(&g->work);
    while (g->durable < offset && !g->err && !g->stop) {
        if (pthread_cond_timedwait(&g->done, &g->mu, &ts) == ETIMEDOUT) break;
    }
    int r = g->durable >= offset ? 1 : g->err ? -g->err : 0;
    pthread_mutex_unlock(&g->mu);
    return r;
}

int rmq_gc_run(rmq_gc *g) {
    gc_file todo[RMQ_GC_BATCH];
    int64_t lo[RMQ_GC_BATCH], hi[RMQ_GC_BATCH];
    pthread_mutex_lock(&g->mu);
    while (!g->stop && !g->err) {
        if (g->wanted <= g->durable) {
            g->idle = 1;
            pthread_cond_wait(&g->work, &g->mu);
            g->idle = 0;
            continue;
        }
        int64_t end = __atomic_load_n(g->live, __ATOMIC_ACQUIRE);
        size_t n = 0;
        for (size_t i = 0; i < g->nfiles && n < RMQ_GC_BATCH; i++) {
            const gc_file *f = &g->files[i];
            if (f->from + f->size <= g->durable) continue;
            if (f->from >= end) break;
            todo[n] = *f;
            lo[n] = g->durable > f->from ? g->durable - f->from : 0;
            n++;
            if (n == RMQ_GC_BATCH && f->from + f->size < end) end = f->from + f->size;
        }
        if (g->nfiles) {
            const gc_file *last = &g->files[g->nfiles - 1];
            if (end > last->from + last->size) end = last->from + last->size;
        } else {
            end = g->durable;
        }
        if (end <= g->durable || n == 0) { /* nothing written past durable yet: wait for a file or a write */
            struct timespec ts;
            deadline_after(&ts, 1);
            g->idle = 1;
            pthread_cond_timedwait(&g->work, &g->mu, &ts);
            g->idle = 0;
            continue;
        }
        for (size_t i = 0; i < n; i++) {
            int64_t h = end - todo[i].from;
            hi[i] = h < todo[i].size ? h : todo[i].size;
        }
        rmq_gc_sync_fn sync = g->sync;
        void *sync_ctx = g->sync_ctx;
        pthread_mutex_unlock(&g->mu); /* files are dropped only by this thread: the copies stay valid */
        int err = 0;
        for (size_t i = 0; i < n && !err; i++) {
            if (hi[i] <= lo[i]) continue;
            if (sync) {
                err = sync(sync_ctx, todo[i].from, lo[i], hi[i]);
                continue;
            }
            while (sync_range(&todo[i], lo[i], hi[i]) != 0) {
                if (errno != EINTR) { err = errno; break; }
            }
        }
        pthread_mutex_lock(&g->mu);
        if (err) {
            g->err = err;
            break;
        }
        g->flushes++;
        if (end > g->durable) __atomic_store_n(&g->durable, end, __ATOMIC_RELEASE);
        /* files wholly durable are never written again: drop them (keep the newest registered) */
        size_t drop = 0;
        while (drop + 1 < g->nfiles && g->files[drop].from + g->files[drop].size <= g->durable) {
            drop_file(&g->files[drop]);
            drop++;
        }
        if (drop) {
            memmove(g->files, g->files + drop, (g->nfiles - drop) * sizeof(gc_file));
            g->nfiles -= drop;
        }
        pthread_cond_broadcast(&g->done);
    }
    int r = g->err ? -g->err : 0;
    pthread_cond_broadcast(&g->done);
    pthread_mutex_unlock(&g->mu);
    return r;
}

void rmq_gc_stop(rmq_gc *g) {
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_broadcast(&g->work);
    pthread_cond_broadcast(&g->done);
    pthread_mutex_unlock(&g->mu);
}

int64_t rmq_gc_durable(const rmq_gc *g) { return __atomic_load_n(&g->durable, __ATOMIC_ACQUIRE); }
int64_t rmq_gc_flushes(const rmq_gc *g) { return __atomic_load_n(&g->flushes, __ATOMIC_RELAXED); }
int rmq_gc_error(const rmq_gc *g) { return __atomic_load_n(&g->err, __ATOMIC_RELAXED); }

#endif
