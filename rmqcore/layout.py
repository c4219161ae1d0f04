"""Every magic number, size and offset of the RocketMQ store formats, named.

Each constant notes the upstream class it mirrors. All integers in every store file are big-endian.

CommitLog record (offsets for IPv4 born and store hosts; an IPv6 host field is 20 bytes, not 8)::

    off  size  field                       (MessageExtEncoder / CommitLog.checkMessageAndReturnSize)
      0     4  TOTALSIZE                   whole record, this field included
      4     4  MAGICCODE                   V1 0xDAA320A7 | V2 0xDAA320AB | BLANK 0xCBD43194
      8     4  BODYCRC                     zlib CRC-32 of the stored body & 0x7FFFFFFF
     12     4  QUEUEID
     16     4  FLAG
     20     8  QUEUEOFFSET
     28     8  PHYSICALOFFSET
     36     4  SYSFLAG
     40     8  BORNTIMESTAMP
     48   8|20 BORNHOST                    address (4|16) + int port
     ..     8  STORETIMESTAMP
     ..   8|20 STOREHOSTADDRESS
     ..     4  RECONSUMETIMES
     ..     8  PREPARED TRANSACTION OFFSET
     ..   4+n  BODYLENGTH + BODY
     ..   1|2+t TOPICLENGTH (V1: signed byte, V2: short) + TOPIC
     ..   2+p  PROPERTIESLENGTH + PROPERTIES
"""
from __future__ import annotations

from .errors import BadMagicError, ChecksumError, RecordSizeError, TruncatedRecordError

# --- CommitLog record (MessageDecoder, MessageVersion, CommitLog) ---------------------------------
MAGIC_V1 = -626843481  # 0xDAA320A7, MessageVersion.MESSAGE_VERSION_V1
MAGIC_V2 = -626843477  # 0xDAA320AB, MessageVersion.MESSAGE_VERSION_V2 (5.1.0+: 2-byte topic length)
MAGIC_BLANK = -875286124  # 0xCBD43194, CommitLog.BLANK_MAGIC_CODE (end-of-file filler)
BLANK_SIZE = 8  # CommitLog.END_FILE_MIN_BLANK_LENGTH: int remaining + int magic
MIN_RECORD_SIZE = 91  # calMsgLength with empty body/topic/properties, IPv4 hosts, V1
MAX_TOPIC_LEN_V1 = 127  # TopicValidator.TOPIC_MAX_LENGTH (chars); V1 length byte is signed
MAX_TOPIC_LEN = 255  # retry/DLQ topics may reach 255 chars
MAX_PROPERTIES_LEN = 32767  # Short.MAX_VALUE, PROPERTIES_SIZE_EXCEEDED above
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # MessageStoreConfig.maxMessageSize (body limit since 4.9.4)

POS_TOTALSIZE = 0
POS_MAGIC = 4
POS_BODYCRC = 8
POS_QUEUEID = 12
POS_FLAG = 16
POS_QUEUEOFFSET = 20
POS_PHYSICALOFFSET = 28
POS_SYSFLAG = 36
POS_BORNTIMESTAMP = 40
POS_BORNHOST = 48
HOST_LEN_V4 = 8  # a host field: address (4 bytes) + int port
HOST_LEN_V6 = 20  # address (16 bytes) + int port, with FLAG_BORNHOST_V6 / FLAG_STOREHOST_V6
POS_STORETIMESTAMP = POS_BORNHOST + HOST_LEN_V4  # 56, after an IPv4 born host
POS_STORETIMESTAMP_V6 = POS_BORNHOST + HOST_LEN_V6  # 68, after an IPv6 born host

# --- SYSFLAG bits (MessageSysFlag) ----------------------------------------------------------------
FLAG_COMPRESSED = 0x1
FLAG_MULTI_TAGS = 0x2
TRANSACTION_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED = 0x4
TRANSACTION_COMMIT = 0x8
TRANSACTION_ROLLBACK = 0xC
FLAG_BORNHOST_V6 = 0x10
FLAG_STOREHOST_V6 = 0x20
FLAG_NEED_UNWRAP = 0x40
FLAG_INNER_BATCH = 0x80
COMPRESSION_TYPE_MASK = 0x700  # (sysflag & mask) >> 8: 0/3 zlib, 1 lz4, 2 zstd
COMPRESSION_NAMES = {0: "zlib", 1: "lz4", 2: "zstd", 3: "zlib"}

# --- properties string (MessageDecoder) -----------------------------------------------------------
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_WAIT = "WAIT"
PROPERTY_DELAY = "DELAY"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_CLUSTER = "CLUSTER"
KEY_SEPARATOR = " "

# --- kernel statuses (shared by native and pure scanners) ------------------------------------------
ST_MSG = 1  # a valid record starts here
ST_END = 0  # no more data: limit reached, or a zero size/magic (unwritten space)
ST_BLANK = 2  # BLANK filler: the rest of this file is unused
ST_TORN = -1  # record runs past the limit (torn tail after a crash)
ST_BAD_MAGIC = -2
ST_BAD_SIZE = -3  # TOTALSIZE disagrees with the recomputed size, or is impossible
ST_BAD_CRC = -4

STATUS_NAMES = {
    ST_MSG: "msg",
    ST_END: "end",
    ST_BLANK: "blank",
    ST_TORN: "torn",
    ST_BAD_MAGIC: "bad_magic",
    ST_BAD_SIZE: "bad_size",
    ST_BAD_CRC: "bad_crc",
}

# the CorruptionError (and its message) each invalid-record status raises when a record is decoded
STATUS_ERRORS = {
    ST_TORN: (TruncatedRecordError, "record runs past the end of the data"),
    ST_BAD_MAGIC: (BadMagicError, "unknown magic code"),
    ST_BAD_SIZE: (RecordSizeError, "record size disagrees with its field lengths"),
    ST_BAD_CRC: (ChecksumError, "body CRC mismatch"),
}

# --- columnar batch decode: row layout of the int64 output array (decode_batch) --------------------
COLUMNS = (
    "position",  # offset of the record in the decoded buffer
    "size",
    "magic",
    "body_crc",
    "queue_id",
    "flag",
    "queue_offset",
    "physical_offset",  # the stored PHYSICALOFFSET field
    "sys_flag",
    "born_timestamp",
    "born_host_pos",  # buffer offset of the born address (4 or 16 bytes per sys_flag)
    "born_port",
    "store_timestamp",
    "store_host_pos",
    "store_port",
    "reconsume_times",
    "prepared_transaction_offset",
    "body_pos",
    "body_len",
    "topic_pos",
    "topic_len",
    "properties_pos",
    "properties_len",
)
NCOLUMNS = len(COLUMNS)
(
    C_POSITION,
    C_SIZE,
    C_MAGIC,
    C_BODY_CRC,
    C_QUEUE_ID,
    C_FLAG,
    C_QUEUE_OFFSET,
    C_PHYSICAL_OFFSET,
    C_SYS_FLAG,
    C_BORN_TIMESTAMP,
    C_BORN_HOST_POS,
    C_BORN_PORT,
    C_STORE_TIMESTAMP,
    C_STORE_HOST_POS,
    C_STORE_PORT,
    C_RECONSUME_TIMES,
    C_PREPARED_TX_OFFSET,
    C_BODY_POS,
    C_BODY_LEN,
    C_TOPIC_POS,
    C_TOPIC_LEN,
    C_PROPERTIES_POS,
    C_PROPERTIES_LEN,
) = range(NCOLUMNS)

# --- dispatch hints (rmqcore's own, in memory only; csrc/rmq_hints.h documents them) -------------
# what a put knows about its record, left for the reput thread: a ring of HINT_CAPACITY entries of
# HINT_FIELDS int64, entry n % HINT_CAPACITY holding hint number n (field H_SEQ = n; -1: none)
HINT_CAPACITY = 32768
HINT_FIELDS = 8
H_SEQ, H_PHYS, H_SIZE, H_QUEUE, H_QOFF, H_TS, H_TAGS, H_KEY = range(HINT_FIELDS)

# --- the dispatch kernel's per-record output (rmqcore's own; csrc/rmq_dispatch.h names them too) ---
# rows of ``disp`` (DISPATCH_ROWS x records, int64) and bits of its flags row
DISPATCH_ROWS = 4
D_TAGS_CODE = 0  # ConsumeQueue tagsCode (Java String.hashCode of TAGS)
D_FLAGS = 1  # DF_* bits
D_KEYS_START = 2  # where the record's index key hashes start in ``keys``
D_KEYS_COUNT = 3  # and how many there are
DF_SCHEDULE = 1  # the topic is SCHEDULE_TOPIC_XXXX (the caller sets the delivery time as tagsCode)
DF_BAD_UTF8 = 2  # the topic or the properties are not valid UTF-8

# --- kernel outcomes (rmqcore's own; csrc/rmq_dispatch.h and rmq_lookup.h name them too, and the
# native kernels check at import that they agree) -------------------------------------------------
# why a Dispatcher run (ReputMessageService's per-record work) stopped before its limit
STOP_NONE = 0  # ran to its limit, or the walk met a status (the run's ``status``)
STOP_QUEUE = 1  # a record needs its queue's file bound: unbound, or the bound one is full
STOP_SPECIAL = 2  # a record needs the store's general path (the reason: SPECIAL_*)
STOP_INDEX = 3  # the index file is unbound or full before a record's key (resume from that key)
STOP_SEG = 4  # the segment-index output is full (apply it, run on)
# why a record takes the general path (STOP_SPECIAL)
SPECIAL_FLAGS = 0  # the delay topic (its tagsCode is the delivery time) or invalid UTF-8
SPECIAL_QUEUE_POS = 1  # its queue offset is not where its queue's file is (RocketMQ writes it there)
SPECIAL_KEYS = 2  # more keys than the kernel's scratch holds
# getMessage's unit loop (GetMessageStatus: NO_MATCHED_MESSAGE, FOUND, MESSAGE_WAS_REMOVING)
SELECT_NO_MATCH = 0
SELECT_FOUND = 1
SELECT_REMOVING = 2
# what a key lookup answers when it has no result to give
LOOKUP_DISPATCH_FIRST = 1  # the CommitLog holds records not dispatched yet: dispatch, then ask again
LOOKUP_CANNOT_ANSWER = 2  # the store's general path must answer (files changed, a key it cannot hash...)

# --- files and geometry (MessageStoreConfig, UtilAll.offset2FileName) ------------------------------
FILE_NAME_DIGITS = 20
DEFAULT_COMMITLOG_FILE_SIZE = 1024 * 1024 * 1024
CQ_UNIT_SIZE = 20
CQ_UNIT_FIELDS = [("offset", ">i8"), ("size", ">i4"), ("tags", ">i8")]  # a unit as a numpy dtype
DEFAULT_CQ_FILE_SIZE = 300_000 * CQ_UNIT_SIZE
DEFAULT_INDEX_SLOTS = 5_000_000
DEFAULT_INDEX_ENTRIES = 20_000_000
CHECKPOINT_FILE_SIZE = 4096


def offset_to_file_name(offset: int) -> str:
    """UtilAll.offset2FileName: the 20-digit, zero-padded decimal name of a file starting at offset."""
    if offset < 0:
        raise ValueError(f"file offsets are non-negative, not {offset}")
    return f"{offset:0{FILE_NAME_DIGITS}d}"


def file_name_to_offset(name: str) -> int | None:
    """Inverse of offset_to_file_name; None for names that are not 20 decimal digits."""
    if len(name) != FILE_NAME_DIGITS or not name.isdigit() or not name.isascii():
        return None
    return int(name)


# --- notify file (rmqcore's own, ``<store>/notify``; rmqcore/live/notifyfile.py, csrc/rmq_notify.h) -
# The writer's small shared map that readers in other processes wait on. RocketMQ has no such file
# (its consumers long-poll the broker); a broker ignores it, and a store without it is followed by
# polling. Host byte order (little-endian on x86-64 and arm64); every word is aligned.
#
#   off   size  field
#     0      8  magic b"RMQNTFY1"
#     8      4  version (1)
#    12      4  slot count (1024)
#    16      4  state: 0 no writer (closed cleanly), 1 a writer is recovering, 2 a writer is open
#    20      4  generation: +1 each time a writer opens the store (a restart)
#    24      8  writer pid
#    32      8  dispatched: CommitLog offset below which every record has its consume-queue units
#    40      8  CommitLog min offset (retention moves it)
#    64      8  lifecycle wake slot (seq u32, waiters u32): bumped when state, generation or min change
#    72      8  the writer's reput wake slot (seq u32, waiters u32): the reput thread naps on it; a put
#               bumps it while a wait is in progress (the count below), a wait about to sleep too
#    80      4  waits in progress (u32, any process): each wait adds 1 before it sleeps and takes it
#               back after; a writer's open sets 0 (followers re-enter their waits: it bumps every slot)
#  4096  8 * n  wake slot of each queue: (seq u32, waiters u32), queue (topic, id) at slot
#               (String.hashCode(topic) * 31 + id) mod 2^32 mod n; dispatch bumps seq after the
#               queue's new units (a unit is published by its size field, stored last)
NOTIFY_FILE = "notify"
NOTIFY_MAGIC = b"RMQNTFY1"
NOTIFY_VERSION = 1
NOTIFY_SLOTS = 1024
NOTIFY_SLOT_SIZE = 8
NOTIFY_SLOTS_AT = 4096
NOTIFY_FILE_SIZE = NOTIFY_SLOTS_AT + NOTIFY_SLOTS * NOTIFY_SLOT_SIZE
NF_MAGIC, NF_VERSION, NF_SLOTS, NF_STATE, NF_GENERATION, NF_PID, NF_DISPATCHED, NF_COMMITLOG_MIN = (
    0, 8, 12, 16, 20, 24, 32, 40)
NF_LIFECYCLE = 64
NF_REPUT_WAKE = 72
NF_WAITS = 80
NOTIFY_STATE_CLOSED, NOTIFY_STATE_RECOVERING, NOTIFY_STATE_OPEN = 0, 1, 2

# --- spare consume-queue files (rmqcore's own, ``<store>/spare/spare-<n>``; rmqcore/spares.py): a
# writer's files of the consume-queue file size, all zeros, renamed into a queue's directory when it
# needs a file; nothing else is ever in the directory, and a broker ignores it
SPARE_DIR = "spare"
SPARE_PREFIX = "spare-"

# --- consumer offsets committed by followers (rmqcore's own, ``config/consumerOffset.inbox``) -----
# One JSON object per line, {"topic@group": {"<queue id>": offset}}, appended under an exclusive
# flock by read-only followers; the writer (the one owner of consumerOffset.json, as RocketMQ's
# broker) applies the lines in order, persists consumerOffset.json, then empties the file.
OFFSET_INBOX_FILE = "consumerOffset.inbox"


def record_size(body_len: int, topic_len: int, properties_len: int, sys_flag: int, v2: bool) -> int:
    """MessageExtEncoder.calMsgLength: bytes one record takes."""
    return (
        MIN_RECORD_SIZE
        + max(body_len, 0)
        + topic_len
        + properties_len
        + (12 if sys_flag & FLAG_BORNHOST_V6 else 0)
        + (12 if sys_flag & FLAG_STOREHOST_V6 else 0)
        + (1 if v2 else 0)
    )
