/*
 * rmq_groupcommit.h - SYNC_FLUSH group commit without the GIL (CommitLog.GroupCommitService).
 *
 * One flusher thread (rmq_gc_run, called from a Python thread inside a nogil block) fdatasyncs the
 * CommitLog files holding bytes in [durable, live), where ``live`` is the appender's published end
 * (release store after the record bytes, read here with acquire), then publishes the new durable
 * offset and wakes every waiter. Producers wait in rmq_gc_wait with the GIL released, so neither a
 * flush nor a wake-up needs the interpreter: a producer takes the GIL only to return.
 *
 * Files are registered (rmq_gc_add_file) before the appender writes into them; the service keeps
 * its own duplicate of each descriptor and closes it once the file is entirely durable, so no
 * descriptor of the caller's is ever used after it is closed. Durability is never claimed past the
 * end of the last registered file.
 */
#ifndef RMQ_GROUPCOMMIT_H
#define RMQ_GROUPCOMMIT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rmq_gc rmq_gc;

/* Makes bytes [lo, hi) of the registered file that starts at global offset file_from durable;
 * returns 0 or an errno. Called by the flusher thread without the service's lock. */
typedef int (*rmq_gc_sync_fn)(void *ctx, int64_t file_from, int64_t lo, int64_t hi);

/* NULL when out of memory or when threads are unavailable on this platform. */
rmq_gc *rmq_gc_new(const int64_t *live, int64_t durable);
/* Only after rmq_gc_run has returned (or was never called): closes the duplicated descriptors. */
void rmq_gc_free(rmq_gc *g);
/* Sync through fn(ctx, ...) instead of msync/fdatasync (an injected file layer: fault tests); set
 * before rmq_gc_run starts. Everything else (batching, the durable offset, the waits) is unchanged. */
void rmq_gc_set_sync(rmq_gc *g, rmq_gc_sync_fn fn, void *ctx);
/* 0, or -errno (dup failed, out of memory). Files must be added in offset order. */
int rmq_gc_add_file(rmq_gc *g, int fd, int64_t file_from, int64_t file_size);
/* Ask for a flush covering offset; returns at once. */
void rmq_gc_request(rmq_gc *g, int64_t offset);
/* 1 once every byte below offset is durable, 0 on timeout or stop, -errno when a flush failed. */
int rmq_gc_wait(rmq_gc *g, int64_t offset, int64_t timeout_ms);
/* The flusher loop; returns after rmq_gc_stop or the first failed fdatasync (0 or -errno). */
int rmq_gc_run(rmq_gc *g);
void rmq_gc_stop(rmq_gc *g);
int64_t rmq_gc_durable(const rmq_gc *g);
int64_t rmq_gc_flushes(const rmq_gc *g);
/* 0, or the errno of the failed fdatasync. */
int rmq_gc_error(const rmq_gc *g);

#ifdef __cplusplus
}
#endif

#endif /* RMQ_GROUPCOMMIT_H */
