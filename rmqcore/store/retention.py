"""Retention (RocketMQ's CleanCommitLogService and CleanConsumeQueueService): expired CommitLog files
are deleted oldest first, then the consume-queue, index and columnar files they leave behind; past
the disk's warning level writes are refused until a clean finds it below again.

``Retention`` owns the disk-full state; the store's put path follows it (``writing.choose_put_path``).
"""
from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from ..columnar.manifest import drop_copies
from ..config import bool_arg, int_arg, real_arg
from ..errors import ConfigError, DiskFullError
from .writing import choose_put_path

if TYPE_CHECKING:
    from . import MessageStore

__all__ = ["Retention"]


class Retention:
    """The store's file deletion and disk-full watermark."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.disk_full = False  # writes are refused: the disk was past the warning level at the last clean

    def usage_ratio(self) -> float:
        """Used space of the CommitLog's file system, in percent (what RocketMQ's thresholds compare)."""
        st = os.statvfs(self._store.commitlog.directory)
        total = st.f_blocks * st.f_frsize
        return 100.0 * (total - st.f_bavail * st.f_frsize) / total if total else 0.0

    def refuse_write(self, *a: Any, **k: Any) -> Any:
        """What a write meets while the disk is past the warning level."""
        s = self._store
        raise DiskFullError(f"{s.store_dir}: disk usage is past {s.config.disk_space_warning_level_ratio}%; "
                            "writes are refused until clean_expired() frees space")

    def _set_disk_full(self, full: bool) -> None:
        s = self._store
        if full != self.disk_full and not s.read_only:
            self.disk_full = full
            choose_put_path(s)

    def clean_expired(self, now_ms: int | None, force: bool, usage_ratio: float | None) -> list[str]:
        """``MessageStore.clean_expired``."""
        s = self._store
        s._check_writable()
        cfg = s.config
        now_ms = int(time.time() * 1000) if now_ms is None else int_arg(now_ms, "now_ms")
        ratio = self.usage_ratio() if usage_ratio is None else real_arg(usage_ratio, "usage_ratio")
        self._set_disk_full(ratio > cfg.disk_space_warning_level_ratio)
        clean_now = ratio > min(cfg.disk_space_clean_forcibly_ratio, cfg.disk_space_warning_level_ratio)
        try:
            hour = time.localtime(now_ms / 1000).tm_hour
        except (OverflowError, OSError, ValueError):
            raise ConfigError(f"now_ms {now_ms} is no time this system can name") from None
        time_up = any(h.strip().isdigit() and int(h) == hour for h in cfg.delete_when.split(";"))
        if not (time_up or ratio > cfg.disk_max_used_space_ratio or bool_arg(force, "force") or clean_now):
            return []
        dispatch, cl = s._dispatch, s.commitlog
        dispatch.caught_up()
        s._keys.drop()
        with dispatch.locked():
            dispatch.release()
            deleted: list[str] = []
            reserve_ms = cfg.file_reserved_time_hours * 3600 * 1000
            for mf in list(cl.queue.files[:-1]):
                if len(deleted) >= cfg.delete_file_batch_max:
                    break
                expired = now_ms >= os.path.getmtime(mf.path) * 1000 + reserve_ms
                if not (expired or (clean_now and cfg.clean_file_forcibly_enable)):
                    break
                if mf.file_end_offset > dispatch.reput_from_offset:
                    break  # never delete what dispatch has not read
                cl.queue.delete_first()
                deleted.append(mf.path)
            if deleted:
                self._delete_logics(cl.min_offset)
                drop_copies(s.store_dir, [os.path.basename(p) for p in deleted])  # rmqcore-columnar/
                if s._notify is not None:  # followers drop their maps of the deleted files
                    s._notify.publish_min(cl.min_offset)
        return deleted

    def _delete_logics(self, cl_min: int) -> None:
        """The consume-queue and index files wholly before ``cl_min`` go; the segment index follows."""
        s = self._store
        with s._services.logics_files_lock, s._services.warm_paused():
            for cq in s.consume_queues.values():
                cq.delete_expired(cl_min)
            if s.index is not None:
                s.index.delete_expired(cl_min)
        if s.segindex is not None:
            s.segindex.recover(s._dispatch.reput_from_offset)
