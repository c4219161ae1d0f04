"""The store's background services and what they make durable: the CommitLog flush (GroupCommitService
under SYNC_FLUSH, FlushRealTimeService under ASYNC_FLUSH), FlushConsumeQueueService (consume queues
and the checkpoint), the reput thread (``reput.ReputService``), the logics warm-ahead and the spare
consume-queue files (``spares.SpareFiles``).

``StoreServices`` owns those threads, starts them once the store has recovered and stops every one
of them at close, and owns the lock held while consume-queue and index files are synced (taken by
whatever closes such files meanwhile: retention).
"""
from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING

from .. import layout as L
from ..flush import AsyncFlushService, GroupCommitService
from ..spares import SpareFiles
from ..warmahead import Region, WarmAhead
from .pull import store_time_in
from .reput import ReputService

if TYPE_CHECKING:
    from . import MessageStore

__all__ = ["StoreServices"]

_LOGICS_WARM_CHUNK = 512 * 1024  # consume-queue / index bytes the warm-ahead thread populates per call


class StoreServices:
    """The threads of one store (see the module)."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.reput: ReputService | None = None
        self.group_commit: GroupCommitService | None = None
        self.async_flush: AsyncFlushService | None = None
        self.logics_flush: AsyncFlushService | None = None
        self.logics_warmer: WarmAhead | None = None
        # a writer's spare consume-queue files, before any queue is opened (what a crashed writer
        # left is deleted here); their thread starts with the first file taken
        self.spares = None if store.read_only else SpareFiles(store.store_dir / L.SPARE_DIR,
                                                              store.config.cq_file_size)
        # held while consume-queue and index files are synced, and by whatever closes such files
        # meanwhile (retention): the periodic flush syncs without the dispatch lock
        self.logics_files_lock = threading.Lock()

    def start_flush(self) -> None:
        """A writer's flush services (before the put path is chosen: SYNC_FLUSH puts wait for theirs)."""
        s = self._store
        cfg, cl = s.config, s.commitlog
        if cfg.flush_disk_type == "SYNC_FLUSH":
            self.group_commit = GroupCommitService(cl, cfg.sync_flush_timeout_ms, s.impl)
        else:
            self.async_flush = AsyncFlushService(
                lambda: cl.flushed_offset, lambda: cl.max_offset, cl._flush, cfg.flush_interval_ms,
                cfg.flush_least_pages, cfg.flush_thorough_interval_ms)
        # consume queues, index files and the checkpoint are flushed on their own schedule
        self.logics_flush = AsyncFlushService(
            lambda: 0, lambda: 1 << 62, self.flush_logics, cfg.flush_interval_consume_queue_ms, 0, 1 << 40)

    def start_dispatch(self) -> None:
        """A writer's reput thread (not with ``dispatch="inline"`` or ``"put"``: with ``"put"`` each
        put publishes its own record) and logics warm-ahead."""
        s = self._store
        cfg, d = s.config, s._dispatch
        if cfg.dispatch == "put":
            d.start_publishing()
        elif cfg.dispatch != "inline":
            assert s._notify is not None  # a writer's: opened before recovery
            self.reput = ReputService(d, s.commitlog._appender, s._notify)
            self.reput.start()
        if cfg.logics_warm_ahead > 0:
            # woken by appends: units and index entries follow the records (a quarter of the bytes
            # warmed ahead of a queue is far more than a quarter as many records' units)
            self.logics_warmer = WarmAhead(self._warm_regions, _LOGICS_WARM_CHUNK,
                                           "rmqcore-logics-warm-ahead", s.commitlog.roller.progress,
                                           cfg.logics_warm_ahead // 4)

    def _warm_regions(self) -> list[Region]:
        return self._store._dispatch.warm_regions(self._store.config.logics_warm_ahead)

    def warm_paused(self) -> contextlib.AbstractContextManager[None]:
        """Held while logics files are unmapped: the warm-ahead thread is not in any map."""
        w = self.logics_warmer
        return contextlib.nullcontext() if w is None else w.paused()

    def stop(self) -> None:
        """Stop the reput thread (after its run) or the puts' publishing, the flush services and the
        logics warm-ahead: every one of them, even when stopping one raised (a flush service's kept
        error), which is raised once all have stopped (no thread is left in a map the caller unmaps)."""
        with contextlib.ExitStack() as steps:  # callbacks run last-in first-out
            if self.logics_warmer is not None:  # before any file is unmapped
                steps.callback(self._stop_logics_warmer)
            if self.spares is not None:  # a queue made from now on creates its file itself
                steps.callback(self.spares.close)
            for svc in (self.logics_flush, self.async_flush, self.group_commit):
                if svc is not None:
                    steps.callback(svc.stop)
            reput, self.reput = self.reput, None
            if reput is not None:
                reput.stop()
            d = getattr(self._store, "_dispatch", None)
            if d is not None:  # puts publish no more (dispatch="put")
                d.stop_publishing()

    def _stop_logics_warmer(self) -> None:
        if self.logics_warmer is not None:
            self.logics_warmer.stop()
            self.logics_warmer = None

    # -- what is made durable ---------------------------------------------------------------------------
    def flush(self) -> None:
        """``MessageStore.flush``: CommitLog, topics, consume queues, index files, segment index,
        then the checkpoint (pending dispatch first)."""
        s = self._store
        d, cp = s._dispatch, s.checkpoint
        d.caught_up()
        s.commitlog._flush()
        s._meta.persist_topics_if_dirty()
        ts = d.last_dispatched_ts  # before the syncs: what the reput thread adds meanwhile may miss them
        if ts > 0:
            cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, ts)
        with self.logics_files_lock:
            self.sync_consume_queues()
            if s.index is not None:
                s.index.flush()
        if s.segindex is not None:
            s.segindex.flush()
        if ts > 0:
            cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, ts)
        cp.flush()

    def flush_logics(self) -> None:
        """Flush dispatched consume queues, then the checkpoint (periodic: FlushConsumeQueueService).

        Index files are not synced here, as in RocketMQ: a full one is synced when the next one
        is created (and its end time becomes the checkpoint's indexMsgTimestamp), the rest at
        close or ``flush()``; after a crash, recovery deletes the index files newer than that time
        and rebuilds them by re-dispatch. (Synced every second, the active index file, its slots
        dirtied all over, would cost a long msync every second under load.)"""
        s = self._store
        if s._closed:
            return
        s._meta.persist_topics_if_dirty()
        s._meta.drain_inbox()
        # what is dispatched at this instant is in the page cache before the syncs start, so they
        # make it durable; dispatch goes on meanwhile (a sync of a busy index file takes 100+ ms,
        # and reads dispatch first: holding the dispatch lock stalled every read that long)
        d = s._dispatch
        with d.locked():
            ts, reput = d.last_dispatched_ts, d.reput_from_offset
        with self.logics_files_lock:
            if s._closed:
                return
            self.sync_consume_queues()
            cp = s.checkpoint
            if ts > 0:
                cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, ts)
                if s.commitlog.flushed_offset >= reput:
                    # every dispatched record is also flushed: its time bounds what a crash can lose
                    cp.physic_msg_timestamp = max(cp.physic_msg_timestamp, ts)
            cp.flush()

    def sync_consume_queues(self) -> None:
        """Sync the consume queues, then set each written file's mtime to its last unit's store time
        (``ConsumeQueue.stamp_mtimes``) (``logics_files_lock`` held)."""
        cl = self._store.commitlog

        def unit_store_time(physical_offset: int, size: int) -> int | None:
            try:
                return store_time_in(cl, physical_offset)
            except ValueError:  # the file's map was closed meanwhile (clean_expired)
                return None

        for cq in list(self._store.consume_queues.values()):  # the reput thread may add queues meanwhile
            cq.flush()
            cq.stamp_mtimes(unit_store_time)
